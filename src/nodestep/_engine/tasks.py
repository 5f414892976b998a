"""Run one task: call the node on its copy of the state and turn what it returns into writes.

A node's failure goes down its error routes, or out of the run (``route_failure``).

Where a task runs:

* ``async def`` nodes run on the event loop (as tasks of a task group when the superstep
  has several tasks).
* A plain ``def`` node runs in a worker thread when it shares the superstep with other
  tasks or has a timeout, so it never stalls them. A lone plain ``def`` task with no timeout
  runs inline on the loop's thread: a thread hop costs about 70 µs, more than a whole
  superstep's bookkeeping, and there is nothing for it to stall. Inside a subgraph it
  goes to a thread: the parent's other tasks share the loop.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import BaseModel

from nodestep._engine.blocked_renewal import blocking, unblocked
from nodestep._engine.handoff import parent_command
from nodestep._engine.interrupts import GraphInterrupt, Interrupt, TaskScope, current_task
from nodestep._engine.observe import TaskWatch
from nodestep._engine.private_state import changed_private, read_private
from nodestep._engine.runtime import Runtime
from nodestep._engine.task_input import task_input
from nodestep._errors import GraphExecutionError, NodeTimeoutError, StateStoreError
from nodestep._flow.edges import END, Terminal
from nodestep._flow.nodes import Node, NodeContext
from nodestep._flow.routing import Command, Send
from nodestep._state.channels import FieldWrite
from nodestep._state.reducers import add, merge_dict
from nodestep._state.schema import StateSchema
from nodestep._state.view import touched_fields
from nodestep._superstep.position import PlannedTask, TaskResult

__all__ = [
    "TaskOutcome",
    "interpret",
    "raisable",
    "route_failure",
    "run_plain_task",
    "run_task",
    "run_task_in_thread",
]


@dataclass(slots=True)
class TaskOutcome:
    """How a task ended: a result, a pause, or an error."""

    task: PlannedTask
    result: TaskResult | None = None
    paused: Interrupt | None = None
    cache: dict[str, Any] | None = None
    error: BaseException | None = None
    more: tuple[Interrupt, ...] = ()
    routable: bool = False  # a node's failure that error routes were not yet asked about


def raisable(error: BaseException, task: PlannedTask) -> BaseException:
    """Return what the run raises for a task's ``error``: the error itself, but for one
    that cannot leave a coroutine.

    Why: Python turns a ``StopIteration`` raised in a coroutine into ``RuntimeError:
    coroutine raised StopIteration`` (PEP 479), which names neither the node nor the error.
    A node's ``next(iterator)`` on an empty iterator is the usual cause, so the run raises
    a ``GraphExecutionError`` (a ``RuntimeError``, as before) that says so, with the
    node's ``StopIteration`` as its cause; the history records the ``StopIteration``.
    """
    if not isinstance(error, StopIteration):
        return error
    wrapped = GraphExecutionError(
        f"Node '{task.node}' raised StopIteration{f' ({error})' if str(error) else ''}, "
        f"which cannot pass out of nodestep's coroutines (Python would raise 'RuntimeError: "
        f"coroutine raised StopIteration'). Catch it in the node, e.g. next(iterator, "
        f"default), and return what the node should."
    )
    wrapped.__cause__ = error
    return wrapped


_NO_KWARGS: dict[str, Any] = {}


def _args(node: Node, state: Any, ctx: NodeContext | None) -> tuple[Any, ...]:
    if not node.wants_ctx or node.ctx_keyword is not None:
        return (state,)
    return (ctx, state) if node.ctx_first else (state, ctx)


@dataclass(slots=True)
class _Prepared:
    node: Node
    view: BaseModel
    originals: dict[str, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    scope: TaskScope
    cache: dict[str, Any]
    private: BaseModel | None = None
    private_before: dict[str, Any] | None = None
    seen: TaskWatch | None = None  # the task's span, made current on its thread


def _prepare(
    runtime: Runtime, task: PlannedTask, step: int, attempt: int
) -> _Prepared | TaskOutcome:
    node = runtime.nodes.get(task.node)
    if node is None:
        return TaskOutcome(task, error=runtime.missing_node_error(task.node))
    pos = runtime.pos
    originals = pos.values if task.payload is None else {**pos.values, **task.payload}
    view = runtime.schema.view(originals)
    kept = pos.caches.get(task.task_id)
    cache: dict[str, Any] = dict(kept) if kept else {}
    ctx = None
    if node.wants_ctx:
        ctx = NodeContext(
            graph_name=runtime.graph.name,
            node=node.name,
            run_id=runtime.run_id,
            thread_id=runtime.thread_id,
            branch_id=runtime.branch_id,
            step=step,
            task_id=task.task_id,
            context=runtime.context,
            cache=cache,
            # Asked only of a run that streams: the call was one more a task.
            emit=runtime.emitter(node.name, task.task_id, step) if runtime.emits else None,
            credentials=runtime.credentials,
            roles=node.roles,
            resolved=runtime.resolved,
            attempt=attempt,
            memory=runtime.request.memory,
            agents=None if runtime.agents is None else runtime.agents.for_nodes,
            streamed=runtime.modes,
        )
    scope = TaskScope(node.name, task.task_id, pos.answers, runtime.can_pause, runtime)
    if runtime.in_step_events:
        runtime.debug_input(task, step, view)
    kwargs = _NO_KWARGS if node.ctx_keyword is None else {node.ctx_keyword: ctx}
    if node.input_param is not None:
        try:
            kwargs = {**kwargs, node.input_param: task_input(node, task)}
        except GraphExecutionError as error:
            return TaskOutcome(task, error=error)
    prep = _Prepared(node, view, originals, _args(node, view, ctx), kwargs, scope, cache)
    if node.private_keyword is not None:
        try:
            prep.private, prep.private_before = read_private(node, pos)
        except StateStoreError as error:
            return TaskOutcome(task, error=error)
        prep.kwargs = {**kwargs, node.private_keyword: prep.private}
    watch = runtime.watch
    if watch is not None:  # last: a task that did not start has no span to close
        prep.seen = watch.task(node.name, task.task_id, step, attempt)
    return prep


def _finish(runtime: Runtime, prep: _Prepared, task: PlannedTask, returned: Any) -> TaskResult:
    schema = runtime.schema
    result = interpret(schema, runtime, prep.node, task, prep.view, prep.originals, returned)
    if result.goto is None and prep.node.name in runtime.router.goto_only:
        raise runtime.router.no_route_error(prep.node.name)
    if prep.private is not None:
        result.private = changed_private(prep.node, prep.private, prep.private_before)
    if runtime.stores_json:
        # Convert now, so a value without a JSON form fails this task, not a later read.
        result.update_json, replaced = schema.writes_to_json(result.writes)
        result.replaced = replaced or None
    return result


def _failed(
    runtime: Runtime, task: PlannedTask, prep: _Prepared, error: BaseException, route: bool
) -> TaskOutcome:
    """Give a node's exception to ``route_failure``: routed, or failing the run.

    Only an ``Exception`` can be routed: ``KeyboardInterrupt``, ``SystemExit`` and
    cancellation are not the node's failure, and go on as they are. With ``route``
    false the failure comes back ``routable``: a guarded task retries first, and routes
    only the failure of its last attempt (``_engine.guarded``).
    """
    if runtime.watch is not None:
        runtime.watch.task_failed(prep.seen, error)
    if isinstance(error, Exception) and not route:
        return TaskOutcome(task, error=error, routable=True)
    if isinstance(error, Exception):
        return route_failure(runtime, task, error, prep.originals)
    return TaskOutcome(task, error=error)


def route_failure(
    runtime: Runtime, task: PlannedTask, error: Exception, values: dict[str, Any]
) -> TaskOutcome:
    """Route a node's failure by its error routes, or hand it back to fail the run.

    Every exception a node raises (its own, a timeout, an update that does not fit the
    state) comes here and nowhere else, once its retries are spent (``_engine.guarded``),
    so whatever decides about failures has one place to hook in.

    Args:
        runtime: The run.
        task: The task that failed.
        error: What it raised.
        values: The state the task read.

    Returns:
        When an error route took the failure, a result with no writes, the route as its
        ``goto`` and the failure (redacted as a stored error is) in ``failed``, so history
        records it. Else the outcome of ``error`` itself, or of the error of a condition
        that could not be evaluated (chained to it).
    """
    try:
        routes = runtime.router.error_routes(task.node, error, values)
    except Exception as broken:
        broken.__context__ = error
        return TaskOutcome(task, error=broken)
    if routes is None:
        return TaskOutcome(task, error=error)
    failed = runtime.stored_error(error)  # the credentials masked too, as run_failed's
    result = TaskResult(task.node, task.task_id, [], routes, failed=failed)
    if runtime.stores_json:
        result.update_json = {}
    return TaskOutcome(task, result=result)


def _propagates(error: BaseException) -> bool:
    """Tell whether an exception from a node stops the run at once instead of failing it."""
    return isinstance(error, KeyboardInterrupt | SystemExit | anyio.get_cancelled_exc_class())


async def run_task(
    runtime: Runtime, task: PlannedTask, step: int, attempt: int = 1, route: bool = True
) -> TaskOutcome:
    """Run one task on the event loop: an async node, or a lone plain ``def`` node inline.

    Node errors come back in the ``TaskOutcome`` (taken by an error route first, when
    ``route`` and one holds); ``KeyboardInterrupt``, ``SystemExit`` and cancellation
    propagate.
    """
    found = runtime.nodes.get(task.node)
    if found is not None and not found.is_async:
        done = run_plain_task(runtime, task, step, attempt, route)
        return done if isinstance(done, TaskOutcome) else TaskOutcome(task, result=done)
    prep = _prepare(runtime, task, step, attempt)
    if isinstance(prep, TaskOutcome):
        return prep
    node = prep.node
    token = current_task.set(prep.scope)
    try:
        if node.timeout is None:
            returned = await node.fn(*prep.args, **prep.kwargs)
        else:
            returned = await _run_with_limit(node, node.timeout, prep)
        if prep.scope.agents is not None:
            await prep.scope.agents.finish()
        return TaskOutcome(task, result=_finish(runtime, prep, task, returned))
    except BaseException as error:
        if prep.scope.agents is not None:  # a pause or failure stops its sub-agents
            await prep.scope.agents.cancel()
        return _stopped(runtime, task, prep, error, route)
    finally:
        current_task.reset(token)
        if runtime.watch is not None:
            runtime.watch.task_done(prep.seen, task.node, task.task_id, step)


def run_plain_task(
    runtime: Runtime, task: PlannedTask, step: int, attempt: int = 1, route: bool = True
) -> TaskResult | TaskOutcome:
    """Run one task of a plain ``def`` node on the calling thread, the loop's own.

    ``run_task`` without a coroutine: the run loop calls it for a lone plain ``def`` task it
    runs inline. Errors come back as ``run_task``'s do.

    Returns:
        The task's result when the node returned, without an outcome around it (the
        common case, one object less a superstep); else the outcome (a pause, an error,
        a failure an error route took).
    """
    prep = _prepare(runtime, task, step, attempt)
    if isinstance(prep, TaskOutcome):
        return prep
    token = current_task.set(prep.scope)
    hold = None if runtime.writer is None else runtime.writer.hold
    if hold is not None:  # its lease is renewed from another thread while the node blocks
        blocking(hold)
    try:
        return _finish(runtime, prep, task, prep.node.fn(*prep.args, **prep.kwargs))
    except BaseException as error:
        return _stopped(runtime, task, prep, error, route)
    finally:
        if hold is not None:
            unblocked(hold)
        current_task.reset(token)
        if runtime.watch is not None:
            runtime.watch.task_done(prep.seen, task.node, task.task_id, step)


def _stopped(
    runtime: Runtime, task: PlannedTask, prep: _Prepared, error: BaseException, route: bool
) -> TaskOutcome:
    """Return the outcome of a task its node left by raising ``error`` on the loop's thread:
    a pause, or a failure (taken by an error route when ``route`` and one holds).

    Raises:
        BaseException: ``error`` itself when it stops the run at once (``_propagates``).
    """
    if isinstance(error, GraphInterrupt):
        return TaskOutcome(task, paused=error.pending, cache=prep.cache, more=error.more)
    if _propagates(error):
        raise error
    return _failed(runtime, task, prep, error, route)


async def _run_with_limit(node: Node, timeout: float, prep: _Prepared) -> Any:
    """Await an async node, cancelling it at its limit.

    Only the engine's own limit is a ``NodeTimeoutError``; a ``TimeoutError`` the node
    raises itself is its own failure and stays as it is.
    """
    stopped: BaseException | None = None
    with anyio.move_on_after(timeout):
        try:
            return await node.fn(*prep.args, **prep.kwargs)
        except anyio.get_cancelled_exc_class() as cancelled:
            # Kept for the traceback: it shows where the node was when the limit hit.
            stopped = cancelled
            raise
    # Reached only when the scope swallowed its own cancellation: the limit was hit.
    cause = TimeoutError(f"node '{node.name}' was cancelled at its {timeout:g}s limit")
    cause.__cause__ = stopped
    raise NodeTimeoutError(node.name, timeout) from cause


def run_task_in_thread(
    runtime: Runtime, task: PlannedTask, step: int, attempt: int = 1, route: bool = True
) -> TaskOutcome:
    """Run one plain ``def`` task in the calling worker thread.

    Every error is returned in the ``TaskOutcome``, ``KeyboardInterrupt`` included: the run
    loop re-raises those on its own thread. ``route``: as for ``run_task``.
    """
    prep = _prepare(runtime, task, step, attempt)
    if isinstance(prep, TaskOutcome):
        return prep
    node = prep.node
    token = current_task.set(prep.scope)
    started = time.monotonic()
    try:
        returned = node.fn(*prep.args, **prep.kwargs)
        took = time.monotonic() - started
        if node.timeout is not None and took > node.timeout:
            # A thread cannot be stopped at the limit; report it now that the node returned.
            cause = TimeoutError(
                f"node '{node.name}' returned after {took:.3g}s, past its {node.timeout:g}s "
                f"limit; a thread cannot be stopped, so the limit is checked on return"
            )
            raise NodeTimeoutError(node.name, node.timeout) from cause
        return TaskOutcome(task, result=_finish(runtime, prep, task, returned))
    except GraphInterrupt as pause:
        return TaskOutcome(task, paused=pause.pending, cache=prep.cache, more=pause.more)
    except BaseException as error:
        return _failed(runtime, task, prep, error, route)
    finally:
        current_task.reset(token)
        if runtime.watch is not None:
            runtime.watch.task_done(prep.seen, task.node, task.task_id, step)


def interpret(
    schema: StateSchema,
    runtime: Runtime,
    node: Node,
    task: PlannedTask,
    view: BaseModel,
    originals: dict[str, Any],
    returned: Any,
) -> TaskResult:
    """Turn a node's return value into validated writes and its chosen routes."""
    name = node.name
    if returned is view:
        return TaskResult(name, task.task_id, _in_place_writes(schema, name, view, originals))
    changed = touched_fields(view, originals)
    if changed:
        fields = ", ".join(f"'{f}'" for f, _ in changed)
        raise GraphExecutionError(
            f"Node '{name}' changed {fields} of its state in place and also returned "
            f"{_describe(returned)}. Pick one style: return the state you changed, or leave "
            f"it unchanged and return the update."
        )
    if returned is None:
        return TaskResult(name, task.task_id, [])
    if isinstance(returned, dict):
        return TaskResult(name, task.task_id, schema.validate_update(returned, name))
    if isinstance(returned, Command):
        if returned.resume is not None:
            raise TypeError(
                f"Node '{name}' returned Command(resume=...); resume= answers a paused thread "
                f"and is passed by the caller, as invoke(Command(resume=...), thread_id=...). "
                f"A node returns Command(update=..., goto=...)."
            )
        if returned.graph is not None:
            raise parent_command(runtime, name, returned)
        writes: list[FieldWrite] = []
        if returned.update is not None:
            writes = schema.validate_update(returned.update, name)
        goto = None if returned.goto is None else runtime.router.goto_routes(node, returned.goto)
        return TaskResult(name, task.task_id, writes, goto)
    if isinstance(returned, Send):
        return TaskResult(name, task.task_id, [], runtime.router.goto_routes(node, [returned]))
    if returned is END:
        return TaskResult(name, task.task_id, [], [])
    if inspect.iscoroutine(returned):
        returned.close()  # never awaited now; closed, it raises no "never awaited" warning
    raise TypeError(
        f"Node '{name}' returned {_describe(returned)}. A node returns a dict update, the "
        f"state it changed in place, Command(update=..., goto=...), Send(node, payload), END "
        f"or None.{_fix_for(returned)}"
    )


def _fix_for(returned: Any) -> str:
    """Return the fix for a wrong return value of a common kind, or ``""``."""
    if (
        isinstance(returned, list | tuple)
        and returned
        and all(isinstance(item, Send) for item in returned)
    ):
        return (
            " To send several, return Command(goto=[Send(...), ...]) and declare the "
            "targets in @node(goto=[...])."
        )
    if inspect.iscoroutine(returned):
        return (
            " The node is a plain def that returned a coroutine: make it an async def that "
            "awaits the call."
        )
    if inspect.isgenerator(returned) or inspect.isasyncgen(returned):
        return (
            " A node runs once and returns its update; to report progress while it runs, "
            "call ctx.emit(...) on its NodeContext."
        )
    if isinstance(returned, BaseModel):
        return (
            f" A {type(returned).__name__} made in the node is not the state it got: return "
            f"a dict of the fields to change, e.g. model.model_dump(exclude_unset=True)."
        )
    return ""


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, Terminal):
        return value.name
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _in_place_writes(
    schema: StateSchema, node: str, view: BaseModel, originals: dict[str, Any]
) -> list[FieldWrite]:
    writes: list[FieldWrite] = []
    for key, new in touched_fields(view, originals):
        spec = schema.fields[key]
        value = spec.validate(new, node)
        reducer = getattr(spec.channel, "reducer", None)
        old = originals[key]
        # Only the part written is checked in full (``revalidate``): an append to a long
        # list pays for the items appended, not for the list.
        if reducer is None:
            writes.append((key, spec.revalidate(value, node), False))
        elif reducer is add and isinstance(old, list) and isinstance(value, list):
            if value[: len(old)] == old:
                added = spec.revalidate(value[len(old) :], node, merged=True, at=len(old))
                writes.append((key, added, False))
            else:
                writes.append((key, spec.revalidate(value, node), True))
        elif reducer is merge_dict and isinstance(old, dict) and isinstance(value, dict):
            if old.keys() <= value.keys():
                changed = {k: v for k, v in value.items() if k not in old or old[k] != v}
                writes.append((key, spec.revalidate(changed, node, merged=True), False))
            else:
                writes.append((key, spec.revalidate(value, node), True))
        else:
            raise GraphExecutionError(
                f"Node '{node}' changed field '{key}' in place, but the field's reducer is a "
                f"custom one, so the change cannot be expressed as an update. Return a dict "
                f"with the update instead (or Replace(value) to set it)."
            )
    return writes
