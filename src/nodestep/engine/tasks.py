"""Run one task: call the node on its copy of the state and turn what it returns into writes.

Where a task runs:

* ``async def`` nodes run on the event loop (as asyncio tasks when the superstep has
  several tasks).
* A plain ``def`` node runs in a worker thread when it shares the superstep with other
  tasks or has a timeout, so it never stalls them. A lone plain ``def`` task with no timeout
  runs inline on the loop's thread: a thread hop costs about 70 µs, more than a whole
  superstep's bookkeeping, and there is nothing for it to stall.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from nodestep.engine.interrupts import GraphInterrupt, Interrupt, TaskScope, current_task
from nodestep.errors import GraphExecutionError, NodeTimeoutError
from nodestep.graph.flow import END, Command, Send, Terminal
from nodestep.graph.nodes import Node, NodeContext
from nodestep.state.reducers import add, merge_dict
from nodestep.state.schema import StateSchema
from nodestep.state.view import touched_fields
from nodestep.superstep.position import PlannedTask, TaskResult, Write

if TYPE_CHECKING:
    from nodestep.engine.runtime import Runtime

__all__ = ["TaskOutcome", "interpret", "run_task"]

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _worker_pool() -> ThreadPoolExecutor:
    # One pool for the process, so a call does not pay for starting threads.
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="nodestep")
    return _executor


@dataclass(slots=True)
class TaskOutcome:
    """How a task ended: a result, a pause, or an error."""

    task: PlannedTask
    result: TaskResult | None = None
    paused: Interrupt | None = None
    cache: dict[str, Any] | None = None
    error: BaseException | None = None


def _args(node: Node, state: Any, ctx: NodeContext | None) -> tuple[Any, ...]:
    if not node.wants_ctx:
        return (state,)
    return (ctx, state) if node.ctx_first else (state, ctx)


async def run_task(rt: Runtime, task: PlannedTask, step: int, inline: bool) -> TaskOutcome:
    """Run one task of superstep ``step`` and return how it ended (never raises for node errors).

    ``KeyboardInterrupt`` and ``SystemExit`` are not node failures: they propagate.
    """
    node = rt.nodes.get(task.node)
    if node is None:
        return TaskOutcome(task, error=rt.missing_node_error(task.node))
    originals = rt.values if task.payload is None else {**rt.values, **task.payload}
    view = rt.schema.view(originals)
    cache: dict[str, Any] = dict(rt.caches.get(task.task_id, {}))
    ctx = None
    if node.wants_ctx:
        ctx = NodeContext(
            graph_name=rt.graph_name,
            node=node.name,
            run_id=rt.run_id,
            thread_id=rt.thread_id,
            branch_id=rt.branch_id,
            step=step,
            task_id=task.task_id,
            context=rt.context,
            cache=cache,
            emit=rt.emitter(node.name, task.task_id, step),
        )
    scope = TaskScope(node.name, task.task_id, rt.answers, rt.can_pause)
    rt.debug_input(task, step, view)
    try:
        returned = await _call(node, _args(node, view, ctx), scope, inline)
        result = interpret(rt.schema, rt, node, task, view, originals, returned)
        if rt.stores_json:
            # Convert now, so a value without a JSON form fails this task, not a later read.
            result.update_json, replaced = rt.schema.writes_to_json(result.writes)
            result.replaced = replaced or None
    except GraphInterrupt as pause:
        return TaskOutcome(task, paused=pause.pending, cache=cache)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # noqa: BLE001 - a node failure, reported in order
        if isinstance(error, asyncio.CancelledError):
            raise
        return TaskOutcome(task, error=error)
    return TaskOutcome(task, result=result)


async def _call(node: Node, args: tuple[Any, ...], scope: TaskScope, inline: bool) -> Any:
    fn: Callable[..., Any] = node.fn
    if node.is_async:
        token = current_task.set(scope)
        try:
            if node.timeout is None:
                return await fn(*args)
            try:
                async with asyncio.timeout(node.timeout):
                    return await fn(*args)
            except TimeoutError:
                raise NodeTimeoutError(node.name, node.timeout) from None
        finally:
            current_task.reset(token)
    if inline and node.timeout is None:
        token = current_task.set(scope)
        try:
            return fn(*args)
        finally:
            current_task.reset(token)

    def in_thread() -> Any:
        current_task.set(scope)
        return fn(*args)

    context = contextvars.copy_context()
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    returned = await loop.run_in_executor(_worker_pool(), context.run, in_thread)
    if node.timeout is not None and time.monotonic() - started > node.timeout:
        # The thread could not be stopped at the limit; report it now that it returned.
        raise NodeTimeoutError(node.name, node.timeout)
    return returned


def interpret(
    schema: StateSchema,
    rt: Runtime,
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
    if type(returned) is dict:
        return TaskResult(name, task.task_id, schema.validate_update(returned, name))
    if isinstance(returned, Command):
        writes: list[Write] = []
        if returned.update is not None:
            writes = schema.validate_update(returned.update, name)
        goto = None if returned.goto is None else rt.goto_routes(node, returned.goto)
        return TaskResult(name, task.task_id, writes, goto)
    if isinstance(returned, Send):
        return TaskResult(name, task.task_id, [], rt.goto_routes(node, [returned]))
    if returned is END:
        return TaskResult(name, task.task_id, [], [])
    if isinstance(returned, dict):
        return TaskResult(name, task.task_id, schema.validate_update(returned, name))
    raise TypeError(
        f"Node '{name}' returned {_describe(returned)}. A node returns a dict update, the "
        f"state it changed in place, Command(update=..., goto=...), Send(node, payload), END "
        f"or None."
    )


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, Terminal):
        return value.name
    return f"a {type(value).__name__}"


def _in_place_writes(
    schema: StateSchema, node: str, view: BaseModel, originals: dict[str, Any]
) -> list[Write]:
    writes: list[Write] = []
    for key, new in touched_fields(view, originals):
        spec = schema.fields[key]
        value = spec.validate(new, node)
        channel = spec.channel
        reducer = getattr(channel, "reducer", None)
        old = originals[key]
        if reducer is None:
            writes.append((key, value, False))
        elif reducer is add and isinstance(old, list) and isinstance(value, list):
            if value[: len(old)] == old:
                writes.append((key, value[len(old) :], False))
            else:
                writes.append((key, value, True))
        elif reducer is merge_dict and isinstance(old, dict) and isinstance(value, dict):
            if old.keys() <= value.keys():
                writes.append((key, {k: v for k, v in value.items() if k not in old or old[k] != v}, False))
            else:
                writes.append((key, value, True))
        else:
            raise GraphExecutionError(
                f"Node '{node}' changed field '{key}' in place, but the field's reducer is a "
                f"custom one, so the change cannot be expressed as an update. Return a dict "
                f"with the update instead (or Replace(value) to set it)."
            )
    return writes
