"""The model and tool nodes' calls with the graph's middleware hooks around them.

The nodes call these only when a middleware is active (``active_middleware``), so an agent
without middleware pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nodestep._flow.middleware import Middleware, run_hooks
from nodestep._flow.nodes import NodeContext
from nodestep.agents._messages import AssistantMessage, ToolCall, ToolMessage
from nodestep.agents._middleware.context import (
    ModelMiddlewareContext,
    ModelRequest,
    ToolMiddlewareContext,
)

__all__ = ["hooked_model_call", "hooked_tool_call"]

# A bound on the model calls one node call makes through ``on_model_error`` replacements:
# a hook that retries for ever would otherwise spin without end.
MAX_MODEL_ATTEMPTS = 10


def _wrong(hook: str, takes: str) -> TypeError:
    return TypeError(f"{hook} takes {takes}")


async def hooked_model_call(
    middleware: tuple[Middleware, ...],
    ctx: NodeContext,
    state: Any,
    request: ModelRequest,
    send: Callable[[ModelRequest], Awaitable[AssistantMessage]],
) -> AssistantMessage:
    """Call the model through ``before_model``, ``on_model_error`` and ``after_model``.

    Returns:
        The reply, as the ``after_model`` hooks left it.

    Raises:
        MiddlewareError: a hook raised or replaced with a value of the wrong kind.
        Exception: the model's error, when no ``on_model_error`` hook replaced it.
    """
    mctx = ModelMiddlewareContext(
        ctx.graph_name, ctx.node, ctx.run_id, ctx.thread_id, ctx.step, ctx.task_id, state
    )
    mctx.request = request

    def before(value: Any) -> None:
        if isinstance(value, ModelRequest):
            mctx.request = value
        elif isinstance(value, AssistantMessage):
            mctx.response = value
        else:
            raise _wrong("before_model", "a ModelRequest or an AssistantMessage")

    await run_hooks(middleware, "before_model", mctx, replaceable=True, apply=before)
    while mctx.response is None:
        sent = mctx.request
        mctx.attempts.append(sent.model.name)
        try:
            mctx.response = await send(sent)
        except Exception as error:
            if len(mctx.attempts) >= MAX_MODEL_ATTEMPTS:
                error.add_note(f"the model was tried {len(mctx.attempts)} times; giving up")
                raise
            mended = await run_hooks(
                middleware, "on_model_error", mctx, error, replaceable=True, apply=before
            )
            if mended is None:
                raise  # no hook mended it: the model's own error

    def after(value: Any) -> None:
        if not isinstance(value, AssistantMessage):
            raise _wrong("after_model", "an AssistantMessage")
        mctx.response = value

    await run_hooks(middleware, "after_model", mctx, replaceable=True, reverse=True, apply=after)
    return mctx.response


async def hooked_tool_call(
    middleware: tuple[Middleware, ...],
    ctx: NodeContext,
    state: Any,
    calls: tuple[ToolCall, ...],
    index: int,
    run: Callable[[ToolCall, Callable[[Exception], Awaitable[None]]], Awaitable[ToolMessage]],
) -> ToolMessage:
    """Run one tool call through ``before_tool``, ``on_tool_error`` and ``after_tool``.

    ``run`` runs the call (with the arguments the hooks left) and makes its message; it
    calls the function it is given with the tool's exception before the error message is
    made, which runs ``on_tool_error``.

    Raises:
        MiddlewareError: a hook raised or replaced with a value of the wrong kind.
    """
    call = calls[index]
    tctx = ToolMiddlewareContext(
        ctx.graph_name, ctx.node, ctx.run_id, ctx.thread_id, ctx.step, ctx.task_id, state
    )
    tctx.tool_name, tctx.args, tctx.tool_call_id = call.name, dict(call.args), call.id
    tctx.calls, tctx.index = calls, index

    def before(value: Any) -> None:
        if isinstance(value, dict):
            tctx.args = value
        elif isinstance(value, ToolMessage):
            tctx.result = value
        else:
            raise _wrong("before_tool", "a dict of arguments, ctx.respond or ctx.refuse")

    await run_hooks(middleware, "before_tool", tctx, replaceable=True, apply=before)
    if tctx.result is None:

        async def seen(error: Exception) -> None:
            await run_hooks(middleware, "on_tool_error", tctx, error, reverse=True)

        edited = call if tctx.args == call.args else call.model_copy(update={"args": tctx.args})
        tctx.result = await run(edited, seen)

    def after(value: Any) -> None:
        if isinstance(value, str) and tctx.result is not None:
            tctx.result = tctx.result.model_copy(update={"content": value})
        elif isinstance(value, ToolMessage):
            tctx.result = value
        else:
            raise _wrong("after_tool", "a ToolMessage or its text")

    await run_hooks(middleware, "after_tool", tctx, replaceable=True, reverse=True, apply=after)
    return tctx.result
