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
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from queue import SimpleQueue
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

__all__ = ["TaskOutcome", "interpret", "run_task", "run_task_in_thread", "submit"]


class _WorkerPool:
    """Daemon worker threads fed from one queue, for plain ``def`` nodes.

    ``ThreadPoolExecutor.submit`` costs about 9 µs on the submitting thread (a future and a
    semaphore per call); a superstep that fans out to fifty plain ``def`` nodes pays that fifty
    times on the event loop's thread. Tasks here report back through the run's inbox, so a
    queue put is all a submit needs. A thread is started whenever no worker is idle, up to
    ``max_workers``; workers then stay for the life of the process.
    """

    def __init__(self, max_workers: int = 32) -> None:
        self.max_workers = max_workers
        self._queue: SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]]] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args))
        with self._lock:
            if self._idle > 0 or self._threads >= self.max_workers:
                self._idle -= 1 if self._idle > 0 else 0
                return
            self._threads += 1
        threading.Thread(target=self._work, name=f"nodestep-{self._threads}", daemon=True).start()

    def _work(self) -> None:
        queue, lock = self._queue, self._lock
        while True:
            fn, args = queue.get()
            # Task wrappers report their own errors through the run's inbox.
            with contextlib.suppress(BaseException):
                fn(*args)
            with lock:
                self._idle += 1


_pool: _WorkerPool | None = None
_pool_lock = threading.Lock()


def _worker_pool() -> _WorkerPool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _WorkerPool()
    return _pool


def _forget_pool_after_fork() -> None:
    # A forked child has none of the parent's threads; start a fresh pool on demand.
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool_after_fork)


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


@dataclass(slots=True)
class _Prepared:
    node: Node
    view: BaseModel
    originals: dict[str, Any]
    args: tuple[Any, ...]
    scope: TaskScope
    cache: dict[str, Any]


def _prepare(rt: Runtime, task: PlannedTask, step: int) -> _Prepared | TaskOutcome:
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
    return _Prepared(node, view, originals, _args(node, view, ctx), scope, cache)


def _finish(rt: Runtime, prep: _Prepared, task: PlannedTask, returned: Any) -> TaskOutcome:
    result = interpret(rt.schema, rt, prep.node, task, prep.view, prep.originals, returned)
    if rt.stores_json:
        # Convert now, so a value without a JSON form fails this task, not a later read.
        result.update_json, replaced = rt.schema.writes_to_json(result.writes)
        result.replaced = replaced or None
    return TaskOutcome(task, result=result)


async def run_task(rt: Runtime, task: PlannedTask, step: int) -> TaskOutcome:
    """Run one task on the event loop: an async node, or a lone plain ``def`` node inline.

    Node errors come back in the ``TaskOutcome``; ``KeyboardInterrupt``, ``SystemExit``
    and cancellation propagate.
    """
    prep = _prepare(rt, task, step)
    if isinstance(prep, TaskOutcome):
        return prep
    node = prep.node
    token = current_task.set(prep.scope)
    try:
        if not node.is_async:
            returned = node.fn(*prep.args)
        elif node.timeout is None:
            returned = await node.fn(*prep.args)
        else:
            try:
                async with asyncio.timeout(node.timeout):
                    returned = await node.fn(*prep.args)
            except TimeoutError:
                raise NodeTimeoutError(node.name, node.timeout) from None
        return _finish(rt, prep, task, returned)
    except GraphInterrupt as pause:
        return TaskOutcome(task, paused=pause.pending, cache=prep.cache)
    except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
        raise
    except BaseException as error:
        return TaskOutcome(task, error=error)
    finally:
        current_task.reset(token)


def run_task_in_thread(rt: Runtime, task: PlannedTask, step: int) -> TaskOutcome:
    """Run one plain ``def`` task in the calling worker thread.

    Every error is returned in the ``TaskOutcome``, ``KeyboardInterrupt`` included: the run
    loop re-raises those on its own thread.
    """
    prep = _prepare(rt, task, step)
    if isinstance(prep, TaskOutcome):
        return prep
    node = prep.node
    token = current_task.set(prep.scope)
    started = time.monotonic()
    try:
        returned = node.fn(*prep.args)
        if node.timeout is not None and time.monotonic() - started > node.timeout:
            # A thread cannot be stopped at the limit; report it now that the node returned.
            raise NodeTimeoutError(node.name, node.timeout)
        return _finish(rt, prep, task, returned)
    except GraphInterrupt as pause:
        return TaskOutcome(task, paused=pause.pending, cache=prep.cache)
    except BaseException as error:
        return TaskOutcome(task, error=error)
    finally:
        current_task.reset(token)


def submit(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on the shared worker pool (fire and forget)."""
    _worker_pool().submit(fn, *args)


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
    if isinstance(returned, dict):
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
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


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
                writes.append(
                    (key, {k: v for k, v in value.items() if k not in old or old[k] != v}, False)
                )
            else:
                writes.append((key, value, True))
        else:
            raise GraphExecutionError(
                f"Node '{node}' changed field '{key}' in place, but the field's reducer is a "
                f"custom one, so the change cannot be expressed as an update. Return a dict "
                f"with the update instead (or Replace(value) to set it)."
            )
    return writes
