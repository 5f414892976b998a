"""The model node: sends the conversation to a chat model and appends its reply.

The conversation is the state's ``messages`` field (a ``Messages`` field, as in
``MessagesState``), or, with ``conversation="private"``, the node's own memory of it in
its private state (see ``model_memory``). The reply's id is chosen before the model is
called, from the conversation and the task (``<node>-<n>``, or ``<node>[<k>]-<n>`` for
the node's further tasks of a superstep), so the tokens of a ``"messages"`` stream
name the message that is stored at the end of the step, once, whole.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from nodestep._engine.observe import ModelCall, model_span
from nodestep._errors import GraphConfigError, ModelError
from nodestep._flow.middleware import active_middleware
from nodestep._flow.nodes import Node, NodeContext, node
from nodestep._flow.recorded import recording
from nodestep._flow.resilience import RetryPolicy
from nodestep.agents._conversation import add_messages, next_message_id
from nodestep.agents._messages import AssistantMessage, SystemMessage, ToolCall
from nodestep.agents._middleware.calls import hooked_model_call
from nodestep.agents._middleware.context import ModelRequest
from nodestep.agents._model_memory import ModelMemory, take_in
from nodestep.agents._models import ChatModel, MessageChunk, assemble
from nodestep.agents._repair import ToolCallRepair
from nodestep.agents._tool_choice import check_tool_choice, choice_for
from nodestep.agents._tools import Tool, tools_by_name

__all__ = [
    "check_conversation",
    "checked_reply",
    "conversation_of",
    "conversation_problem",
    "model_node",
    "reply_id_for",
    "report_reply",
    "retryable_model_error",
    "streamed_reply",
    "with_call_ids",
]

Conversation = Literal["state", "private"]


def retryable_model_error(error: BaseException) -> bool:
    """Tell whether another attempt may cure ``error``: a 429, 5xx or lost connection.

    Give it to a model node's policy, ``RetryPolicy(retry_on=retryable_model_error)``:
    a ``ModelError`` with ``retryable`` set is retried, a 400 or a bad key is not.
    """
    return isinstance(error, ModelError) and error.retryable


def conversation_of(state: Any, node_name: str) -> list[Any]:
    """Return the state's ``messages``, or raise the error that says how to add them.

    Raises:
        GraphConfigError: the state has no ``messages`` field.
    """
    messages = getattr(state, "messages", None)
    if not isinstance(messages, list):
        raise GraphConfigError(
            f"Node {node_name!r} reads the conversation from the state's 'messages' field, "
            f"but {type(state).__name__} has none. Subclass MessagesState, or add a field "
            f"messages: Messages = Field(default_factory=MessageList)."
        )
    return messages


def conversation_problem(state: type[BaseModel], node_name: str) -> str | None:
    """Return why ``state`` cannot hold the conversation of node ``node_name``, or ``None``.

    A model node and a tool node read the state's ``messages`` and write new messages to
    it, which only ``add_messages`` merges as they need: it appends a reply, gives a tool
    message its place, and replaces an edited message by its id. Without a reducer each
    write would replace the whole conversation, and silently, so the check runs when the
    flow is declared (it is the node's ``state_check``).
    """
    field = state.model_fields.get("messages")
    fix = (
        "Declare messages: Messages = Field(default_factory=MessageList) (Messages is "
        "Annotated[list[AnyMessage], add_messages] with shorthands), or subclass MessagesState"
    )
    if field is None:
        return (
            f"Node '{node_name}' reads the conversation from the state's 'messages' field, "
            f"but {state.__name__} has none. {fix}"
        )
    if not any(item is add_messages for item in field.metadata):
        return (
            f"Node '{node_name}' adds its messages to the field 'messages' of "
            f"{state.__name__}, which has no add_messages reducer, so each write would "
            f"replace the whole conversation. {fix}"
        )
    return None


def check_conversation(made: Node) -> Node:
    """Return ``made`` with ``conversation_problem`` as its state check."""
    made.state_check = lambda state: conversation_problem(state, made.name)
    return made


def _check_model(model: object) -> None:
    if not isinstance(model, ChatModel):
        raise GraphConfigError(
            f"model_node takes a chat model (an object with a name and async complete() and "
            f"stream() methods), got {type(model).__name__}; use ScriptedModel, "
            f"OpenAIChatModel or a class of your own."
        )


def check_system(system: object) -> None:
    """Refuse a system prompt that is not text (or ``None``), naming it.

    Raises:
        GraphConfigError: ``system`` is neither a str nor ``None``.
    """
    if system is not None and not isinstance(system, str):
        raise GraphConfigError(
            f"system= takes the system prompt as a str, or None for none; got "
            f"{type(system).__name__} {system!r:.60}."
        )


def _prompt(system: object) -> list[SystemMessage]:
    """Return the messages ``system`` puts before the conversation (checked first)."""
    check_system(system)
    return [SystemMessage(content=system)] if isinstance(system, str) and system else []


def _tool_specs(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    not_a_tool = "tools takes functions made with @tool, got {item!r}; decorate it with @tool."
    return [item.spec for item in tools_by_name(tools, not_a_tool).values()]


def model_node(
    model: ChatModel,
    *,
    tools: Sequence[Tool] = (),
    system: str | None = None,
    name: str = "agent",
    stream: bool = True,
    retry: RetryPolicy | None = None,
    conversation: Conversation = "state",
    tool_choice: str | None = None,
) -> Node:
    """Make a node that asks ``model`` for the next message of the conversation.

    The node reads the state's ``messages``, puts ``system`` in front of them (the system
    prompt is sent on every call, never stored), and returns the reply as
    ``{"messages": [reply]}``. Tool calls without a result are sent with an error result
    (see ``repair_tool_calls``); the stored conversation is left as it is.

    Args:
        model: The chat model.
        tools: The tools the model may call; it is given their JSON specs.
        system: The system prompt, or ``None``.
        name: The node's name.
        stream: Ask the model for a stream, and send each piece as a ``"messages"`` stream
            event (a ``MessageChunk``) while the model writes; ``False`` calls ``complete``.
        retry: The node's ``RetryPolicy``, e.g. ``RetryPolicy(attempts=4,
            retry_on=retryable_model_error)`` to retry a 429 or 5xx; each retry is a
            ``task_retried`` record in the history.
        conversation: ``"state"`` sends the shared ``messages``; ``"private"`` keeps the
            node's own memory of them in its private state (a ``ModelMemory``) and sends
            that.
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a tool's name for the
            model (see ``choice_for``), or ``None``: the model's default.

    Returns:
        The node.

    Raises:
        GraphConfigError: ``model`` is not a chat model, ``tools`` holds something that
            is not a ``Tool`` or two tools of one name, ``conversation`` is neither
            ``"state"`` nor ``"private"``, a bad ``tool_choice`` (``check_tool_choice``);
            and from ``Graph.flow()``, a state without ``messages`` by ``add_messages``.
    """
    _check_model(model)
    specs = _tool_specs(tools)
    check_tool_choice(tool_choice, [spec["name"] for spec in specs], model)
    prompt = _prompt(system)
    call_model, call_with_memory = _callers(model, specs, prompt, stream, tool_choice)
    doc = f"Ask the chat model {model.name!r} for the next message."
    if conversation == "state":
        call_model.__doc__ = doc
        return check_conversation(node(call_model, name=name, retry=retry))
    if conversation == "private":
        call_with_memory.__doc__ = doc
        made = node(call_with_memory, name=name, retry=retry, private_state=ModelMemory)
        return check_conversation(made)
    raise GraphConfigError(
        f"model_node got conversation={conversation!r}; it takes 'state' (the shared "
        f"messages) or 'private' (the node's own memory of them, in its private state)."
    )


Caller = Callable[..., Awaitable[dict[str, Any]]]


def _callers(
    model: ChatModel,
    specs: list[dict[str, Any]],
    prompt: list[Any],
    stream: bool,
    tool_choice: str | None = None,
) -> tuple[Caller, Caller]:
    """Return the node functions: one on the shared conversation, one on its memory."""

    repair = ToolCallRepair()

    async def ask(
        messages: list[Any], reply_id: str, ctx: NodeContext, state: Any = None
    ) -> AssistantMessage:
        replayed = recording()  # a replay of stored runs feeds their replies back
        stored = None if replayed is None else replayed.reply(ctx.node)
        if stored is not None:
            return AssistantMessage.model_validate(stored).model_copy(update={"id": reply_id})
        sent = repair(messages)
        conversation = [*prompt, *sent] if prompt else list(sent)
        choice = choice_for(tool_choice, messages)
        hooks = active_middleware.get()
        if not hooks:
            return await _send(model, conversation, specs, reply_id, ctx, stream, choice)
        request = ModelRequest(conversation, specs, model)

        async def send(r: ModelRequest) -> AssistantMessage:
            return await _send(r.model, r.messages, r.tools, reply_id, ctx, stream, choice)

        reply = await hooked_model_call(hooks, ctx, state, request, send)
        return with_call_ids(reply, reply_id)  # a hook may answer without calling send

    async def call_model(state: Any, ctx: NodeContext) -> dict[str, Any]:
        messages = conversation_of(state, ctx.node)
        reply = await ask(messages, reply_id_for(messages, ctx), ctx, state)
        return {"messages": [reply]}

    async def call_with_memory(state: Any, ctx: NodeContext, memory: ModelMemory) -> Any:
        shared = conversation_of(state, ctx.node)
        take_in(memory, shared)
        reply = await ask(memory.messages, reply_id_for(shared, ctx), ctx, state)
        memory.messages.append(reply)
        return {"messages": [reply]}

    return call_model, call_with_memory


def reply_id_for(messages: list[Any], ctx: NodeContext) -> str:
    """Return the id of the reply the task of ``ctx`` adds to ``messages``.

    It is ``<task id>-<n>`` (``next_message_id``): ``agent-3`` for a node's only task of
    a superstep, ``agent[1]-3`` for its second (a ``Send``). The tasks of one step count
    on from the conversation as it was before the step, so a number alone would give
    their replies one id, and ``add_messages`` would keep only the last reply; task ids
    are unique in a step and given in scheduling order, so the ids are too, whichever
    task finishes first. A lone task's id is its node's name: its reply's id is as before.
    """
    return next_message_id(messages, ctx.task_id)


async def _send(
    model: ChatModel,
    conversation: list[Any],
    specs: list[dict[str, Any]],
    reply_id: str,
    ctx: NodeContext,
    stream: bool,
    choice: dict[str, Any],
) -> AssistantMessage:
    """Call ``model`` once (streamed or not) in a model span; return its named reply.

    ``choice`` is ``{"tool_choice": ...}`` for this call, or empty (see ``choice_for``).
    """
    provider = getattr(model, "provider", None)
    with model_span(model.name, provider, stream) as call:
        if not stream:
            answer = await model.complete(conversation, specs, **choice)
            reply = with_call_ids(checked_reply(answer, model.name), reply_id)
        else:
            reply = await streamed_reply(model, conversation, specs, reply_id, ctx, choice)
            reply = with_call_ids(reply, reply_id)
        if reply.model is None:
            reply = reply.model_copy(update={"model": model.name})
        report_reply(call, reply, model.name)
    return reply


async def streamed_reply(
    model: ChatModel,
    conversation: list[Any],
    specs: list[dict[str, Any]],
    reply_id: str,
    ctx: NodeContext,
    choice: dict[str, Any],
) -> AssistantMessage:
    """Ask ``model`` for its reply with ``stream()``, send each chunk as a ``"messages"``
    event of the node (named ``reply_id``), and return the chunks joined.

    Raises:
        ModelError: the model failed, or a tool call's joined arguments are no JSON object.
    """
    chunks: list[MessageChunk] = []
    stream = model.stream(conversation, specs, **choice)
    try:
        async for chunk in stream:
            chunks.append(chunk)
            if chunk.content or chunk.tool_call_chunks:  # not one that only ends it
                ctx.emit(chunk.model_copy(update={"message_id": reply_id}), "messages")
    finally:
        # A call cancelled mid-reply closes the model's stream now (its HTTP response,
        # say), not when the garbage collector finds it.
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    return assemble(chunks, reply_id, model.name)


def report_reply(call: ModelCall, reply: AssistantMessage, model: str) -> None:
    """Put a reply's model (``model`` when it names none), token counts and finish reason
    on its model call's span."""
    if call.span is None:  # tracing is off: nothing to read the reply for
        return
    usage = reply.usage
    inputs, outputs = (None, None) if usage is None else (usage.input_tokens, usage.output_tokens)
    call.replied(reply.model or model, inputs, outputs, reply.finish_reason)


def checked_reply(reply: object, model: str) -> AssistantMessage:
    """Return ``reply``, refused unless it is the ``AssistantMessage`` a chat model's
    ``complete()`` must return (model nodes and specs agents alike)."""
    if not isinstance(reply, AssistantMessage):
        raise ModelError(
            f"Model {model!r} returned a {type(reply).__name__} from complete(); it must "
            f"return an AssistantMessage.",
            model=model,
        )
    return reply


def with_call_ids(reply: AssistantMessage, reply_id: str) -> AssistantMessage:
    """Return ``reply`` named ``reply_id``, each of its tool calls with an id of its own.

    A call without an id, or with the id of an earlier call of the reply (a server that
    sends none, or numbers each reply's calls alike), gets ``<reply_id>-call-<i>`` (``i``
    its place, from 0). Why: a call's result is found by its id, by the model, by a
    pause's interrupts (one part of the task per call), by the finished calls kept over a
    pause, and by a recorded replay; two calls of one id would share one result.
    """
    calls: list[ToolCall] = []
    seen: set[str] = set()
    renamed = False
    for i, call in enumerate(reply.tool_calls):
        if not call.id or call.id in seen:
            call = call.model_copy(update={"id": f"{reply_id}-call-{i}"})
            renamed = True
        seen.add(call.id)
        calls.append(call)
    if not renamed:
        return reply if reply.id == reply_id else reply.model_copy(update={"id": reply_id})
    return reply.model_copy(update={"id": reply_id, "tool_calls": tuple(calls)})
