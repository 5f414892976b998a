"""The tool node: runs the tool calls of the model's last reply, concurrently.

Each call's result goes back to the model as a ``ToolMessage``, in the order of the calls.
A call that fails (bad arguments, an unknown tool, an exception in the tool, a result
without a JSON form) becomes a tool message with ``status="error"`` that says what went
wrong, so the model can try again; ``handle_errors=False`` fails the run instead (calls
that ran concurrently with an ``ExceptionGroup`` naming each failed call). A
``CredentialsError``, a ``ContextNotProvidedError`` or a ``GraphConfigError`` always fails
the run: the model cannot fix a missing credentials provider, a run without the
``context=`` or memory store a tool reads, or a tool set up wrong.

Calls of tools made with ``@tool(approve=True)`` wait for a person first: the node pauses
with one interrupt, ``id="approve"``, before it runs any call, so on resume no call runs
twice. See ``approvals`` for the answers it takes.

A tool may pause too (``interrupt()``, or a sub-agent it gathers). With several calls, each
runs in a part of the task named by its call id (``TaskScope.part``), so the pause holds
every call's interrupts under distinct keys; the calls that finished are kept in the
node's ``ctx.cache``, stored with the pause, so on resume only the paused calls run again.
A ``MiddlewareError`` of a call fails the run as itself, as with a lone call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio
import orjson
from pydantic import BaseModel, ValidationError

from nodestep._engine.interrupts import GraphInterrupt, TaskScope, current_task
from nodestep._engine.observe import tool_span
from nodestep._engine.sync import may_block_loop
from nodestep._errors import (
    ContextNotProvidedError,
    CredentialsError,
    GraphConfigError,
    GraphExecutionError,
    ModelError,
    WorkspaceError,
)
from nodestep._flow.middleware import MiddlewareError, active_middleware
from nodestep._flow.nodes import Node, NodeContext, node
from nodestep._flow.recorded import recording
from nodestep._state.json import first_at, non_finite
from nodestep.agents._approvals import Decision, ask_approval
from nodestep.agents._conversation import next_message_id
from nodestep.agents._messages import AssistantMessage, ToolCall, ToolMessage
from nodestep.agents._middleware.approval import approval_names
from nodestep.agents._middleware.calls import hooked_tool_call
from nodestep.agents._model_node import check_conversation, conversation_of
from nodestep.agents._tools import Tool, argument_problem, tools_by_name
from nodestep.agents._workspace.calls import (
    call_workspaces,
    checks_workspace,
    tool_workspace,
    workspace_writes,
)
from nodestep.agents._workspace.handle import Workspace

__all__ = ["tool_node"]

ErrorHandler = Callable[[Exception], str]


def _content(result: Any) -> str:
    """Return a tool's result as the text of its message.

    Raises:
        TypeError: the result holds a value without a JSON form; the message is its type.
    """
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return orjson.dumps(result, default=_jsonable).decode()


def _jsonable(value: Any) -> Any:
    """Return the JSON data of a value orjson does not know, or raise naming its type."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(type(value).__name__)


def _no_json_form(call: ToolCall, result: Any, problem: TypeError) -> GraphExecutionError:
    kind = type(result).__name__
    cause = problem.__cause__  # orjson's error wraps the one _jsonable raised
    if isinstance(cause, TypeError):
        held = "" if str(cause) == kind else f" holding a {cause}"
    else:  # orjson's own reason, e.g. an int beyond 64 bits
        held = f" ({problem})"
    return GraphExecutionError(
        f"Tool {call.name!r} returned a {kind}{held}, which has no JSON form, so it cannot "
        f"be sent to the model. Return a str, a pydantic model or JSON data (dicts, lists, "
        f"strings, numbers) from the tool."
    )


def _not_finite(call: ToolCall, result: Any, place: str) -> GraphExecutionError:
    what = f"the float {result!r}" if isinstance(result, float) else f"a {type(result).__name__}"
    held = "" if isinstance(result, float) else f" in which {place}"
    return GraphExecutionError(
        f"Tool {call.name!r} returned {what}{held}, which has no JSON form (JSON has no "
        f"nan or infinity), so it cannot be sent to the model. Return "
        f"finite numbers from the tool: None, or a string such as 'nan', where there is none."
    )


def _error_text(error: Exception, call: ToolCall) -> str:
    if isinstance(error, ValidationError):
        return (
            f"Error: the arguments of {call.name} are not valid: {argument_problem(error)}. "
            f"Call it again with arguments that fit its parameters."
        )
    if isinstance(error, ModelError | WorkspaceError):
        return f"Error: {error}"
    return f"Error: {call.name} raised {type(error).__name__}: {error}"


# The caller's to fix, not the model's: they fail the run, whatever handle_errors says. A
# CredentialsError: pass credentials=; a ContextNotProvidedError: pass context= or memory=
# (a tool's ToolContext or MemoryStore reads them); a GraphConfigError: the tool or graph
# is set up wrong.
_RUN_FAILURES = (CredentialsError, ContextNotProvidedError, GraphConfigError)

_HANDLE_ERRORS = (
    "True (a failed call goes back to the model as an error tool message), False (it fails "
    "the run) or a function that makes the message's text from the exception"
)


def _check_handle_errors(handle_errors: object) -> None:
    """Refuse a ``handle_errors`` that is neither a bool nor a function.

    Raises:
        GraphConfigError: naming the value and the ones that work.
    """
    if isinstance(handle_errors, bool) or (
        callable(handle_errors) and not isinstance(handle_errors, str)
    ):
        return
    raise GraphConfigError(
        f"handle_errors={handle_errors!r} is not a choice: it takes {_HANDLE_ERRORS}."
    )


class _Runner:
    """Runs the calls of one reply and makes their tool messages."""

    def __init__(self, tools: dict[str, Tool], handle_errors: bool | ErrorHandler) -> None:
        self.tools = tools
        self.handle_errors = handle_errors

    async def run(
        self,
        calls: Sequence[ToolCall],
        index: int,
        decision: Decision,
        ctx: NodeContext,
        state: Any,
        inline: bool = False,
        workspace: Workspace | None = None,
    ) -> ToolMessage:
        call = calls[index]
        if decision.rejected:
            why = f": {decision.reason}" if decision.reason else ""
            text = f"The user rejected this call of {call.name}{why}. Do not call it again as is."
            return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error")
        replayed = recording()  # a replay of stored runs feeds their results back
        stored = None if replayed is None else replayed.tool_result(call.id)
        if stored is not None:
            return ToolMessage.model_validate(stored)
        hooks = active_middleware.get()
        if hooks:
            attempt = partial(
                self.attempt, ctx=ctx, state=state, inline=inline, workspace=workspace
            )
            return await hooked_tool_call(hooks, ctx, state, tuple(calls), index, attempt)
        return await self.attempt(call, ctx=ctx, state=state, inline=inline, workspace=workspace)

    async def attempt(
        self,
        call: ToolCall,
        seen: Callable[[Exception], Awaitable[None]] | None = None,
        *,
        ctx: NodeContext,
        state: Any,
        inline: bool,
        workspace: Workspace | None = None,
    ) -> ToolMessage:
        try:
            found = self.tools.get(call.name)
            if found is None:
                raise ModelError(
                    f"there is no tool {call.name!r}; the tools are "
                    f"{', '.join(sorted(self.tools))}. Call one of them."
                )
            with tool_span(call.name, call.id):
                result = await found.ainvoke(
                    dict(call.args),
                    inline=inline,
                    ctx=ctx,
                    state=state,
                    call_id=call.id,
                    workspace=workspace,
                )
        except _RUN_FAILURES:
            raise
        except Exception as error:
            if seen is not None:  # the middleware's on_tool_error, before the message
                await seen(error)
            return self._failed(call, error, _error_text(error, call))
        try:
            content = _content(result)
        except TypeError as problem:
            unsendable = _no_json_form(call, result, problem)
            return self._failed(call, unsendable, f"Error: {unsendable}")
        if "null" in content and not isinstance(result, str):  # nan and inf become null
            nan = first_at(result, "result", non_finite)
            if nan is not None:
                place = f"{nan[0]} is the float {nan[1]!r}"
                unsendable = _not_finite(call, result, place)
                return self._failed(call, unsendable, f"Error: {unsendable}")
        return ToolMessage(content=content, tool_call_id=call.id, name=call.name)

    def _failed(self, call: ToolCall, error: Exception, text: str) -> ToolMessage:
        """Return the error tool message of a failed call, or raise (``handle_errors``)."""
        handler = self.handle_errors
        if handler is False:
            raise error
        if callable(handler):
            text = handler(error)
            if not isinstance(text, str):
                raise GraphConfigError(
                    f"The handle_errors function {getattr(handler, '__name__', handler)!r} "
                    f"returned a {type(text).__name__} for the failed call of tool "
                    f"{call.name!r}; it must return the text of the tool message, a str."
                ) from error
        # The run stores this text in its state, as a failed node's message is stored in
        # run_failed, and a tool that read a secret of the context may show it in its
        # error: cleaned alike, the context's secrets and the credentials masked and the
        # graph's redact= applied (see _engine.redact).
        scope = current_task.get()
        if scope is not None:
            text = scope.runtime.stored_text(text)
        return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status="error")

    async def run_all(
        self,
        calls: Sequence[ToolCall],
        decisions: list[Decision],
        ctx: NodeContext,
        state: Any,
        workspaces: Sequence[Workspace | None],
    ) -> list[Any]:
        if len(calls) == 1:  # alone, a plain def tool runs inline, as a lone def node does
            inline = may_block_loop()
            return [await self.run(calls, 0, decisions[0], ctx, state, inline, workspaces[0])]
        kept: dict[str, Any] = ctx.cache.get(_FINISHED, {})
        results: list[Any] = [None] * len(calls)
        refused: list[tuple[int, Exception]] = []
        failed: list[tuple[int, Exception]] = []
        paused: list[tuple[int, GraphInterrupt]] = []
        task = current_task.get()

        async def one(index: int) -> None:
            call = calls[index]
            if call.id in kept:  # it finished before the pause this run resumes
                results[index] = _restored(kept[call.id], workspaces[index])
                return
            # Every call runs to its end, so that the error names each call that failed,
            # and the pause holds every call's interrupts.
            scope = None if task is None else task.part(call.id)
            try:
                results[index] = await self._in_scope(
                    scope,
                    self.run(calls, index, decisions[index], ctx, state, False, workspaces[index]),
                )
            except GraphInterrupt as pause:
                paused.append((index, pause))
            except (*_RUN_FAILURES, MiddlewareError) as error:
                refused.append((index, error))  # raised as itself, as a lone call raises it
            except Exception as error:
                error.add_note(f"raised by the call {call.id!r} of tool {call.name!r}")
                failed.append((index, error))

        async with anyio.create_task_group() as group:
            for index in range(len(calls)):
                group.start_soon(one, index)
        if refused:
            raise min(refused, key=lambda item: item[0])[1]
        if failed:
            failed.sort(key=lambda item: item[0])
            names = ", ".join(f"{calls[i].name!r} (call {calls[i].id!r})" for i, _ in failed)
            raise ExceptionGroup(
                f"{len(failed)} of {len(calls)} tool calls failed: {names}. With "
                f"handle_errors=False a failed call fails the run",
                [error for _, error in failed],
            )
        if paused:
            raise _paused(ctx, calls, results, workspaces, paused)
        return results

    @staticmethod
    async def _in_scope(scope: TaskScope | None, call: Awaitable[ToolMessage]) -> ToolMessage:
        """Await one call of several in its own part of the task (``TaskScope.part``).

        The part's sub-agents end with the call, as a task's end with the task: gathered
        or cancelled (``TaskAgents``).
        """
        if scope is None:  # the node runs outside the engine: no pause, no sub-agents
            return await call
        token = current_task.set(scope)
        try:
            message = await call
            if scope.agents is not None:
                await scope.agents.finish()
            return message
        except BaseException:
            if scope.agents is not None:
                await scope.agents.cancel()
            raise
        finally:
            current_task.reset(token)


# The key of the finished calls of a reply in the tool node's ctx.cache while others are
# paused: the node's own use of the cache (no tool sees the NodeContext), dotted so that a
# middleware hook's key cannot meet it.
_FINISHED = "nodestep.finished_calls"


def _paused(
    ctx: NodeContext,
    calls: Sequence[ToolCall],
    results: list[Any],
    views: Sequence[Workspace | None],
    paused: list[tuple[int, GraphInterrupt]],
) -> GraphInterrupt:
    """Return the node's pause: every paused call's interrupts, in call order.

    The finished calls' messages (and workspace changes) wait in the task's ctx.cache,
    which the engine stores with the pause: the resumed node runs only the calls that
    paused, so no finished call runs twice.
    """
    ctx.cache[_FINISHED] = {
        calls[i].id: _kept(message, views[i])
        for i, message in enumerate(results)
        if message is not None
    }
    paused.sort(key=lambda item: item[0])
    pending = [each for _, pause in paused for each in (pause.pending, *pause.more)]
    return GraphInterrupt(pending[0], *pending[1:])


def _kept(message: ToolMessage, view: Workspace | None) -> dict[str, Any]:
    """Return a finished call's message, and the workspace changes it made, as JSON data."""
    changes = {} if view is None else view.changes  # a folder's too: saved after the pause
    return {"message": message.model_dump(mode="json"), "changes": changes}


def _restored(kept: dict[str, Any], view: Workspace | None) -> ToolMessage:
    """Return the message of a call that finished before the pause, its changes redone.

    The changes fit the files the call saw; ``update_state`` on the paused thread may have
    changed those, and then the call's changes are dropped and its message says so.
    """
    message = ToolMessage.model_validate(kept["message"])
    if view is None:
        return message
    try:
        for path, text in kept["changes"].items():
            if text is None:
                view.delete(path)
            else:
                view.write(path, text)
    except WorkspaceError as problem:
        text = (
            f"Error: {problem} The workspace changed while the run was paused, so this "
            f"call changed nothing: look again, then call it again."
        )
        return message.model_copy(update={"content": text, "status": "error"})
    return message


def tool_node(
    tools: Sequence[Tool],
    *,
    name: str = "tools",
    handle_errors: bool | ErrorHandler = True,
    workspace: Workspace | None = None,
) -> Node:
    """Make a node that runs the tool calls of the last message of the conversation.

    The node reads the state's ``messages``; when the last one is an assistant message
    with tool calls, it runs them concurrently (a plain ``def`` tool in a worker thread,
    unless it is the only call: then on the event loop's thread) and returns
    ``{"messages": [tool messages...]}``, one per call, in the calls' order.
    Otherwise it returns no update. The node declares the roles of its tools (an OpenAPI
    tool's ``role=``), so pass ``credentials=`` to the run when a tool has one.

    Args:
        tools: The tools (made with ``@tool``).
        name: The node's name.
        handle_errors: ``True`` sends a failed call back to the model as an error tool
            message; a function makes that message's text (a ``str``) from the exception;
            ``False`` fails the run (see the module's docstring).
        workspace: The workspace settings of its tools (see ``Workspace``); ``None``: the defaults.

    Returns:
        The node.

    Raises:
        GraphConfigError: ``tools`` is empty, holds something that is not a ``Tool``, or
            two tools of one name, ``handle_errors`` is neither a bool nor a function,
            or ``workspace`` is no ``Workspace``; from ``Graph.flow()``, no ``messages``
            field with ``add_messages``, or no ``WorkspaceFiles`` field for its tools.
    """
    _check_handle_errors(handle_errors)
    by_name = tools_by_name(tools, "tool_node takes @tool functions, got {item!r}; use @tool.")
    if not by_name:
        raise GraphConfigError("tool_node needs at least one tool; pass tools=[...].")
    runner = _Runner(by_name, handle_errors)
    space = tool_workspace(by_name.values(), workspace)  # None when no tool needs one

    async def run_tools(state: Any, ctx: NodeContext) -> dict[str, Any] | None:
        messages = conversation_of(state, ctx.node)
        last = messages[-1] if messages else None
        if not isinstance(last, AssistantMessage) or not last.tool_calls:
            return None
        calls, decisions = ask_approval(last, by_name, approval_names(active_middleware.get()))
        views = call_workspaces(space, state, len(calls))
        results = await runner.run_all(calls, decisions, ctx, state, views)
        files = workspace_writes(space, state, views, results)
        for index, message in enumerate(results):
            message_id = next_message_id(messages, ctx.node, index + 1)
            results[index] = message.model_copy(update={"id": message_id})
        if calls != last.tool_calls:  # edited by the approver: the reply shows what ran
            results.insert(0, last.model_copy(update={"tool_calls": tuple(calls)}))
        return {"messages": results, **files}

    run_tools.__doc__ = f"Run the calls of tools {', '.join(by_name)}."
    # The node acts in its tools' roles, so a tool can ask the node's context for them.
    roles = sorted({role for item in by_name.values() for role in item.roles})
    return checks_workspace(check_conversation(node(run_tools, name=name, roles=roles)), space)
