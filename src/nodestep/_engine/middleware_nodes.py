"""The engine's calls of the middleware's run and node hooks.

A graph with middleware runs its nodes wrapped (``wrap_nodes``): the wrapper calls
``before_node``, the node, then ``after_node`` (or ``on_error``/``on_interrupt``), and makes
the graph's middleware current (``active_middleware``) so the agents' model and tool nodes
call their hooks too. A graph without middleware runs its nodes as they are: the hot path
has no check of its own (``Runtime`` picks the run nodes once per run).

The wrapper returns what the task returns, so the engine folds it into the step as any
update, and a hook that raises fails the task before any write of the step is made: the
store keeps nothing half-written. The run hooks go around the whole call
(``run_with_hooks``); those of a run's end are called by the loop before it stores the
end (``Ending``), so one that raises is stored as the run's failure.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from nodestep._engine.interrupts import GraphInterrupt
from nodestep._engine.request import RunRequest
from nodestep._engine.results import StreamEvent
from nodestep._flow.middleware import (
    GraphMiddlewareContext,
    Middleware,
    MiddlewareError,
    NodeMiddlewareContext,
    RunOutcome,
    active_middleware,
    run_hooks,
    run_hooks_sync,
    sync_hooks,
)
from nodestep._flow.nodes import Node, NodeContext

__all__ = ["Ending", "Run", "child_with_hooks", "run_with_hooks", "wrap_nodes"]

# The keyword the engine passes the wrapper's NodeContext under; no user function sees it.
_CTX = "_nodestep_middleware_ctx"


_NODE_HOOKS = frozenset({"before_node", "after_node", "on_error", "on_interrupt"})


def wrap_nodes(
    nodes: dict[str, Node], middleware: tuple[Middleware, ...]
) -> dict[str, Node] | None:
    """Return the nodes with the node hooks of ``middleware`` around each plain node.

    A subgraph node (a ``Node`` subclass) is left as it is: its child graph runs its own
    middleware.

    Returns:
        The wrapped nodes, or ``None`` when no middleware has a node hook: then the nodes
        run as they are (the model and tool hooks need no wrapper, see ``run_with_hooks``).
    """
    if not any(_NODE_HOOKS & m.hooks() for m in middleware):
        return None
    return {name: _wrapped(n, middleware) if type(n) is Node else n for name, n in nodes.items()}


def _call_args(node: Node, state: Any, ctx: NodeContext, kwargs: dict[str, Any]) -> Any:
    if node.ctx_keyword is not None:
        kwargs = {**kwargs, node.ctx_keyword: ctx}
    if not node.wants_ctx or node.ctx_keyword is not None:
        return (state,), kwargs
    return ((ctx, state) if node.ctx_first else (state, ctx)), kwargs


def _wrapped(node: Node, middleware: tuple[Middleware, ...]) -> Node:
    """Return a copy of ``node`` whose function runs the node hooks around ``node.fn``.

    A plain ``def`` node whose node hooks are all plain ``def``s stays a plain ``def``
    node, which the engine runs inline or in a worker thread as it would the node itself;
    otherwise the wrapper is async (a plain ``def`` node then runs in a worker thread).
    """
    made = copy.copy(node)
    if node.is_async or not sync_hooks(middleware, _NODE_HOOKS):
        made.fn, made.is_async = _async_wrapper(node, middleware), True
    else:
        made.fn = _sync_wrapper(node, middleware)
    made.wants_ctx, made.ctx_first, made.ctx_keyword = True, False, _CTX
    return made


def _context(node: Node, ctx: NodeContext, state: Any) -> NodeMiddlewareContext:
    return NodeMiddlewareContext(
        ctx.graph_name, node.name, ctx.run_id, ctx.thread_id, ctx.step, ctx.task_id, state
    )


def _sync_wrapper(node: Node, middleware: tuple[Middleware, ...]) -> Callable[..., Any]:
    def hooked(state: Any, **kwargs: Any) -> Any:
        ctx: NodeContext = kwargs.pop(_CTX)
        mctx = _context(node, ctx, state)
        run_hooks_sync(middleware, "before_node", mctx, replaceable=True, apply=_set_state(mctx))
        args, kwargs = _call_args(node, mctx.state, ctx, kwargs)
        try:
            update = node.fn(*args, **kwargs)
        except GraphInterrupt as pause:
            run_hooks_sync(middleware, "on_interrupt", mctx, pause.pending.payload, reverse=True)
            raise
        except MiddlewareError:
            raise  # a hook's failure (of a model or tool hook) is no node error to mend
        except Exception as error:
            found = run_hooks_sync(
                middleware, "on_error", mctx, error, replaceable=True, reverse=True
            )
            if found is None:
                raise
            update = found.value
        mctx.update = update
        after = _set_update(mctx)
        run_hooks_sync(middleware, "after_node", mctx, replaceable=True, reverse=True, apply=after)
        return mctx.update

    return hooked


def _async_wrapper(node: Node, middleware: tuple[Middleware, ...]) -> Callable[..., Any]:
    async def call(state: Any, ctx: NodeContext, kwargs: dict[str, Any]) -> Any:
        args, kwargs = _call_args(node, state, ctx, kwargs)
        if node.is_async:
            return await node.fn(*args, **kwargs)
        # In a worker thread, with this task's context (its interrupt scope, the middleware).
        run = contextvars.copy_context().run
        return await anyio.to_thread.run_sync(partial(run, node.fn, *args, **kwargs))

    async def hooked(state: Any, **kwargs: Any) -> Any:
        ctx: NodeContext = kwargs.pop(_CTX)
        mctx = _context(node, ctx, state)
        await run_hooks(middleware, "before_node", mctx, replaceable=True, apply=_set_state(mctx))
        try:
            update = await call(mctx.state, ctx, kwargs)
        except GraphInterrupt as pause:
            asked = pause.pending.payload
            await run_hooks(middleware, "on_interrupt", mctx, asked, reverse=True)
            raise
        except MiddlewareError:
            raise
        except Exception as error:
            found = await run_hooks(
                middleware, "on_error", mctx, error, replaceable=True, reverse=True
            )
            if found is None:
                raise
            update = found.value
        mctx.update = update
        after = _set_update(mctx)
        await run_hooks(middleware, "after_node", mctx, replaceable=True, reverse=True, apply=after)
        return mctx.update

    return hooked


def _set_state(mctx: NodeMiddlewareContext) -> Callable[[Any], None]:
    kind = type(mctx.state)

    def apply(value: Any) -> None:
        if not isinstance(value, kind):
            raise TypeError(
                f"before_node replaces the state the node reads with another {kind.__name__}, "
                f"such as ctx.replace(ctx.state.model_copy(update={{...}})); it got a "
                f"{type(value).__name__}"
            )
        mctx.state = value

    return apply


def _set_update(mctx: NodeMiddlewareContext) -> Callable[[Any], None]:
    def apply(value: Any) -> None:
        mctx.update = value

    return apply


Ending = Callable[[Any, str], Awaitable[None]]
"""Called by the run loop when a run is about to complete, with its final state and its
thread id, before ``run_completed`` is stored; what it raises fails the run instead."""

Run = Callable[[Ending | None], Awaitable[StreamEvent]]
"""Runs one call, given the ``Ending`` its loop calls before the run completes, or ``None``."""

_END_HOOKS = frozenset({"after_graph", "on_run_end"})


async def run_with_hooks(
    middleware: tuple[Middleware, ...], graph_name: str, req: RunRequest, run: Run
) -> StreamEvent:
    """Run one call with the run hooks around it: ``before_graph``, ``after_graph``,
    ``on_run_end``.

    Only middleware whose ``before_graph`` ran get ``on_run_end``; it is called once,
    however the run ends, in reverse order. An ``on_run_end`` that raises after a failed
    run adds a note to the run's error instead of hiding it. The middleware is current
    (``active_middleware``) for the whole run, so the tasks it starts, on the loop or in
    worker threads, inherit it: the model and tool nodes find it there.

    Why the end of a completed run is hooked inside the loop (``Ending``): ``after_graph``
    and ``on_run_end`` run before ``run_completed`` is stored, while the run still holds
    its thread, so a hook that raises fails the run (``run_failed`` records its
    ``MiddlewareError``) rather than leave a thread stored as completed by a call that
    raised. ``invoke(None, thread_id=...)`` then ends it again, hooks included.

    Returns:
        The run's terminal event.
    """
    token = active_middleware.set(middleware)
    try:
        return await _hooked(middleware, graph_name, req, run)
    finally:
        active_middleware.reset(token)


async def child_with_hooks(
    middleware: tuple[Middleware, ...], graph_name: str, req: RunRequest, run: Run
) -> StreamEvent:
    """Run a subgraph's call with its own middleware, never its parent's.

    Each graph's middleware applies to its own runs and nodes: a child graph runs its run
    hooks (``run_with_hooks``), and its model and tool nodes see its middleware, or none
    when it has none, not the parent's that is current in the parent's task.
    """
    if middleware:
        return await run_with_hooks(middleware, graph_name, req, run)
    if not active_middleware.get():
        return await run(None)
    token = active_middleware.set(())
    try:
        return await run(None)
    finally:
        active_middleware.reset(token)


async def _hooked(
    middleware: tuple[Middleware, ...], graph_name: str, req: RunRequest, run: Run
) -> StreamEvent:
    gctx = GraphMiddlewareContext(graph_name, req.thread_id, req.input)
    started: list[Middleware] = []
    ended = False  # ``on_run_end`` was called (by ``ending``)

    async def ending(state: Any, thread_id: str) -> None:
        nonlocal ended
        gctx.state, gctx.thread_id = state, thread_id
        await run_hooks(middleware, "after_graph", gctx, reverse=True)
        ended = True
        await _ended(started, gctx, RunOutcome("completed"))

    hooked = any(_END_HOOKS & m.hooks() for m in middleware)
    try:
        for item in middleware:
            await run_hooks((item,), "before_graph", gctx)
            started.append(item)
        event = await run(ending if hooked else None)
    except BaseException as error:
        if ended:  # ``on_run_end`` raised it, or the run failed after it
            raise
        cancelled = isinstance(error, anyio.get_cancelled_exc_class())
        outcome = RunOutcome("cancelled" if cancelled else "failed", error=error)
        try:
            await _ended(started, gctx, outcome)
        except MiddlewareError as broken:
            error.add_note(str(broken))
        raise
    if ended:
        return event
    gctx.state, gctx.thread_id = event.data.state, event.data.thread_id
    if event.mode == "final":  # a keyed retry's stored result: the loop did not run
        await ending(gctx.state, gctx.thread_id)
    else:
        await _ended(started, gctx, RunOutcome("paused", dict(event.data.interrupts)))
    return event


async def _ended(
    started: list[Middleware], gctx: GraphMiddlewareContext, outcome: RunOutcome
) -> None:
    """Call every started middleware's ``on_run_end``; raise the first failure after all ran."""
    first: MiddlewareError | None = None
    for item in reversed(started):
        try:
            await run_hooks((item,), "on_run_end", gctx, outcome)
        except MiddlewareError as error:
            first = first or error
    if first is not None:
        raise first
