"""The node functions of an agent: an LLMNode's turn, a tool call, a function step.

Each returns a ``Command``: its update of the agent's records (see ``records``) and where
the flow goes next, which it chooses itself from the model's reply, the tool's result or
its edges' ``when``. An LLMNode sends each tool call to its ToolNode (all in one
superstep, so they run side by side) and the tools send their results back; the
LLMNode then reads them in the order of the calls. A failure on a node's last attempt
takes the node's first ``$is_error`` edge that holds; without one, a tool's failure goes
back to the model as an error tool message, and any other node's fails the step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import BaseModel, ValidationError

from nodestep._engine.observe import model_span, tool_span
from nodestep._engine.sync import may_block_loop
from nodestep._errors import ContextNotProvidedError, CredentialsError
from nodestep._flow.middleware import Middleware, active_middleware
from nodestep._flow.nodes import Node, NodeContext
from nodestep._flow.recorded import recording
from nodestep._flow.routing import Command, Send
from nodestep._state.model_form import validator
from nodestep.agents._conversation import next_message_ids
from nodestep.agents._messages import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from nodestep.agents._middleware.calls import hooked_model_call, hooked_tool_call
from nodestep.agents._middleware.context import ModelRequest
from nodestep.agents._model_node import (
    checked_reply,
    report_reply,
    streamed_reply,
    with_call_ids,
)
from nodestep.agents._models import ChatModel
from nodestep.agents._specs.arguments import to_kwargs
from nodestep.agents._specs.bundles import language_of
from nodestep.agents._specs.calling import Caller, to_text
from nodestep.agents._specs.guards import Guard
from nodestep.agents._specs.kinds import LLMSpec, NodeSpec, ToolSpec
from nodestep.agents._specs.manifests import Specs
from nodestep.agents._specs.masking import mask
from nodestep.agents._specs.prompts import Prompts
from nodestep.agents._specs.records import (
    CallResult,
    Delivery,
    NodeRecord,
    PendingCall,
    StepOutput,
)
from nodestep.agents._specs.routing import choose
from nodestep.agents._tools import argument_problem

__all__ = ["Plan", "call_context", "function_step", "llm_step", "tool_step"]

NodeFn = Callable[..., Any]

# The validators of the records and messages a turn makes, called directly: a model's
# __init__ is a Python frame around the same call, and takes its fields as keywords into
# a dict of its own (about 2.6k instructions a model; 7 a turn of W10's agent). The
# values are validated as __init__ validates them, into the same model.
_new_record = NodeRecord.__pydantic_validator__.validate_python
_new_output = StepOutput.__pydantic_validator__.validate_python
_new_result = CallResult.__pydantic_validator__.validate_python
_new_tool_message = ToolMessage.__pydantic_validator__.validate_python
_new_user_message = UserMessage.__pydantic_validator__.validate_python

_CALLERS_TO_FIX = (CredentialsError, ContextNotProvidedError)
_NOT_RUN = "Error: this call did not finish: the step it was part of failed. Call it again."
_JOIN = "\n\n"
"""What joins the texts that reach a function node in one step, in the order delivered: a
blank line, as a step's outputs are joined (``outcomes.ended``)."""


@dataclass
class Plan:
    """What the node functions of one agent share.

    Attributes:
        specs: The specs.
        model: The chat model of every LLMNode.
        fields: The state field of each LLMNode's conversation.
        prompts: Each LLMNode's prompts.
        callers: How each spec'd tool or function node calls its function.
        checkers: Each spec'd ToolNode's argument model.
        guards: The breaker and time limit of each node that declares one (see ``guards``).
        nodes: The graph's nodes, by name (filled once they are made).
        running: Each node's record while it runs, made once (``running_record``).
    """

    specs: Specs
    model: ChatModel
    fields: dict[str, str]
    prompts: dict[str, Prompts] = field(default_factory=dict)
    callers: dict[str, Caller] = field(default_factory=dict)
    checkers: dict[str, type[BaseModel]] = field(default_factory=dict)
    guards: dict[str, Guard] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    running: dict[str, NodeRecord] = field(default_factory=dict)

    def record(self, name: str, **values: Any) -> NodeRecord:
        """Return a record of node ``name`` with ``values``."""
        values["kind"] = self.specs.nodes[name].kind
        record: NodeRecord = _new_record(values)
        return record

    def running_record(self, name: str) -> NodeRecord:
        """Return node ``name``'s record while it runs, one value shared by every step.

        Why shared: a turn marks two or three nodes running, each a validated record, and
        this one is frozen and holds nothing mutable, so one made per node serves them all.
        """
        record = self.running.get(name)
        if record is None:
            record = self.running[name] = self.record(name, status="running")
        return record


def call_context(ctx: NodeContext) -> dict[str, Any]:
    """Return the call's context; a run of the agent's graph without one reads it empty."""
    try:
        context = ctx.context
    except ContextNotProvidedError:  # the graph run directly, or replayed: no context
        return {}
    return context if isinstance(context, dict) else {}


def _inbox(state: Any, name: str) -> list[tuple[str, Delivery]]:
    mine = [(key, d) for key, d in state.inbox.items() if d is not None and d.to == name]
    return sorted(mine, key=lambda item: (item[1].order, item[0]))


def _written(update: dict[str, Any]) -> dict[str, Any]:
    """Return ``update`` without its empty dicts, which would merge to no change.

    Each field a node writes costs its step a check, a merge and an encoding for the
    history: a turn that consumed no tool result writes no ``results``.
    """
    return {name: value for name, value in update.items() if value != {}}


def _running(plan: Plan, name: str) -> dict[str, NodeRecord]:
    return {name: plan.running_record(name)}


def _failure(plan: Plan, spec: NodeSpec, error: Exception, ctx: NodeContext) -> Command | None:
    """Return the route a failure takes on the node's last attempt, or ``None``."""
    policy = spec.options.get("retry")
    if policy is not None and ctx.attempt < policy.attempts and policy.retries(error):
        return None  # the engine tries again
    if isinstance(error, _CALLERS_TO_FIX):
        return None  # the caller's to fix, never routed
    target = choose(plan.specs.routes.get(spec.name, []), call_context(ctx), error)
    if target is None:
        return None
    message = mask(f"{type(error).__name__}: {error}")
    text = f"{spec.name} failed: {message}"
    failed = plan.record(spec.name, status="failed", has_error=True, error=message)
    update = {
        "nodes": {spec.name: failed, **_running(plan, target)},
        "inbox": {
            f"{spec.name}:failed:{ctx.step}": Delivery(to=target, text=text, source=spec.name)
        },
    }
    return Command(update=update, goto=[target])


def _onward(
    plan: Plan, spec: NodeSpec, text: str, ctx: NodeContext, key: str, update: dict[str, Any]
) -> list[Any]:
    """Send ``text`` along the first edge of ``spec`` that holds, or make it the output."""
    target = choose(plan.specs.routes.get(spec.name, []), call_context(ctx))
    if target is None:
        output = _new_output({"run": ctx.run_id, "text": text, "order": ctx.step})
        update["outputs"] = {spec.name: output}
        return []
    update["inbox"][key] = Delivery(to=target, text=text, source=spec.name)
    update["nodes"].update(_running(plan, target))
    return [target]


def llm_step(plan: Plan, spec: LLMSpec) -> NodeFn:
    """Return the function of LLMNode ``spec``: one turn of its model."""
    field_name = plan.fields[spec.name]
    prompts = plan.prompts[spec.name]
    tools = {y.value for y in spec.tools}

    guard = plan.guards.get(spec.name)

    async def llm_node(state: Any, ctx: NodeContext) -> Command:
        try:
            if guard is None:
                return await _turn(state, ctx)
            return await guard.call(partial(_turn, state, ctx))
        except Exception as error:
            routed = _failure(plan, spec, error, ctx)
            if routed is None:
                raise
            return routed

    async def _turn(state: Any, ctx: NodeContext) -> Command:
        conversation = getattr(state, field_name)
        update: dict[str, Any] = {"results": {}, "inbox": {}, "nodes": {}}
        # The ids of the new messages, then of the reply, in that order: each message is
        # made with its id, rather than made and copied with it.
        ids = next_message_ids(conversation, spec.name)
        new = _taken_results(conversation, state, update, ids)
        new += _taken_inputs(state, spec, plan, update, ids)
        reply_id = next(ids)
        lang = language_of(call_context(ctx).get("lang"))
        system = prompts.message(lang)
        messages = [*conversation, *new]
        if system is not None:
            messages.insert(0, system)
        replayed = recording()  # a replay of stored runs feeds the stored replies back
        stored = None if replayed is None else replayed.reply(ctx.node)
        if stored is not None:
            answer: object = AssistantMessage.model_validate(stored)
        else:
            answer = await _ask(plan, messages, prompts.specs(lang), ctx, state, reply_id)
        reply = _named(answer, reply_id, plan.model.name)
        update[field_name] = [*new, reply]
        record = {"input": [m.content for m in new], "output": reply.content}
        update["nodes"][spec.name] = plan.record(spec.name, status="completed", **record)
        if reply.tool_calls:
            goto = _calls(plan, spec, reply, tools, update)
        else:
            goto = _onward(plan, spec, reply.content, ctx, f"{spec.name}:{reply.id}", update)
        return Command(update=_written(update), goto=goto)

    llm_node.__doc__ = f"Ask the model for LLMNode {spec.name!r}'s next message."
    return llm_node


async def _ask(
    plan: Plan,
    messages: list[Any],
    tools: list[dict[str, Any]],
    ctx: NodeContext,
    state: Any,
    reply_id: str,
) -> object:
    """Ask the model for its reply, through the agent's middleware when it has some."""
    hooks = active_middleware.get()
    if not hooks:
        return await _traced(plan.model, messages, tools, ctx, reply_id)

    async def send(request: ModelRequest) -> AssistantMessage:
        reply = await _traced(request.model, request.messages, request.tools, ctx, reply_id)
        return checked_reply(reply, request.model.name)

    return await hooked_model_call(
        hooks, ctx, state, ModelRequest(messages, tools, plan.model), send
    )


async def _traced(
    model: ChatModel,
    messages: list[Any],
    tools: list[dict[str, Any]],
    ctx: NodeContext,
    reply_id: str,
) -> object:
    """Call the model in a span of its own (with tracing on), as a model node does.

    While the run streams ``"messages"``, the reply comes with ``stream()``, each chunk
    sent as an event named ``reply_id`` (the id the reply is stored under); otherwise
    with one ``complete()``.
    """
    streamed = ctx.streams("messages")
    with model_span(model.name, getattr(model, "provider", None), streamed) as call:
        if streamed:
            reply: object = await streamed_reply(model, messages, tools, reply_id, ctx, {})
        else:
            reply = await model.complete(messages, tools)
        if isinstance(reply, AssistantMessage):
            report_reply(call, reply, model.name)
    return reply


def _taken_results(
    conversation: list[Any], state: Any, update: dict[str, Any], ids: Iterator[str]
) -> list[Any]:
    """Return the tool messages answering the calls of the conversation's last reply, each
    with the next of ``ids``."""
    last = conversation[-1] if conversation else None
    if not isinstance(last, AssistantMessage) or not last.tool_calls:
        return []
    out = []
    for call in last.tool_calls:
        result = state.results.get(call.id)
        content, status = (result.content, result.status) if result else (_NOT_RUN, "error")
        message = {
            "content": content,
            "tool_call_id": call.id,
            "name": call.name,
            "status": status,
            "id": next(ids),
        }
        out.append(_new_tool_message(message))
        update["results"][call.id] = None
    return out


def _taken_inputs(
    state: Any, spec: NodeSpec, plan: Plan, update: dict[str, Any], ids: Iterator[str]
) -> list[Any]:
    """Return the user messages of the node's deliveries, each with the next of ``ids``."""
    taken = _inbox(state, spec.name)
    for key, _ in taken:
        update["inbox"][key] = None
    if not taken and not update["results"]:
        # Reached by an error route of the engine, which an agent took before its nodes
        # took their failures themselves (see ``guards``): a conversation stored then and
        # continued now. The failed node is the one still marked running.
        for name, record in state.nodes.items():
            if record.status == "running" and name != spec.name:
                failed = plan.record(name, status="failed", has_error=True, error="it failed")
                update["nodes"][name] = failed
                return [UserMessage(content=f"{name} failed", id=next(ids))]
    return [_new_user_message({"content": d.text, "id": next(ids)}) for _, d in taken]


def _named(reply: object, reply_id: str, model: str) -> AssistantMessage:
    # Results are keyed by call id: each call gets one of its own (``with_call_ids``).
    return with_call_ids(checked_reply(reply, model), reply_id)


def _calls(
    plan: Plan, spec: LLMSpec, reply: AssistantMessage, tools: set[str], update: dict[str, Any]
) -> list[Any]:
    """Send each call to its ToolNode; a call of an unknown tool is answered at once."""
    sends: list[Any] = []
    alone = sum(call.name in tools for call in reply.tool_calls) == 1
    for index, call in enumerate(reply.tool_calls):
        if call.name in tools:
            # The ToolNode's input (a ``PendingCall``) as a dict: the engine validates a
            # Send's payload into the node's input model, so a model made here would be
            # validated twice, and taken apart again by the ``Send``.
            pending = {
                "id": call.id,
                "name": call.name,
                "args": call.args,
                "caller": spec.name,
                "index": index,
                "alone": alone,
            }
            sends.append(Send(plan.nodes[call.name], pending))
            update["nodes"].update(_running(plan, call.name))
            continue
        known = ", ".join(sorted(tools)) or "none"
        text = f"Error: there is no tool {call.name!r}; the tools are {known}. Call one of them."
        update["results"][call.id] = CallResult(content=text, tool=call.name, status="error")
    if sends:
        return sends
    # Only unknown tools: the node reads their errors in its next turn, running until then.
    update["nodes"][spec.name] = update["nodes"][spec.name].model_copy(update={"status": "running"})
    return [spec.name]


def tool_step(plan: Plan, spec: ToolSpec) -> NodeFn:
    """Return the function of ToolNode ``spec``: one call of its tool.

    A plain ``def`` tool runs in a worker thread, so the calls of one reply run side by
    side; a reply's only call runs on the event loop's thread instead, as a lone plain
    ``def`` node does: nothing of the step runs beside it, and a thread hop costs more
    than a quick tool. A ToolNode with a ``timeout`` always takes a thread, which the
    timeout can stop waiting for.
    """
    threaded = spec.options.get("timeout") is not None

    async def tool_node(state: Any, ctx: NodeContext, call: PendingCall) -> Command:
        replayed = recording()  # a replay of stored runs: the call's stored result
        stored = None if replayed is None else replayed.call_update(call.id)
        inline = call.alone and not threaded and may_block_loop()  # as a lone def node
        hooks = active_middleware.get()
        if stored is not None:
            found = _recorded(spec, call, stored)
        elif hooks:
            found = await _hooked(hooks, plan, spec, call, ctx, state, inline)
        else:
            found = await _called(plan, spec, call, ctx, inline)
        if isinstance(found, Command):
            return found if stored is not None else _routed_call(spec, call, found)
        content, status, outcome = found
        record: dict[str, Any] = {"input": {"name": call.name, "args": call.args}, **outcome}
        nodes: dict[str, Any] = {}
        update: dict[str, Any] = {"nodes": nodes, "inbox": {}}
        result = _new_result({"content": content, "tool": spec.name, "status": status})
        update["results"] = {call.id: result}
        goto = [call.caller]
        if status == "ok":
            target = choose(plan.specs.routes.get(spec.name, []), call_context(ctx))
            if target is not None and target != call.caller:
                delivery = Delivery(to=target, text=content, source=spec.name, order=call.index)
                update["inbox"][f"{spec.name}:{call.id}"] = delivery
                goto = [target]
        # The node the result goes to is running until it records its own turn, so a
        # failure of that turn marks it failed (``Agent._record_failure``).
        nodes.update(_running(plan, goto[0]))
        nodes[spec.name] = plan.record(spec.name, **record)
        return Command(update=_written(update), goto=goto)

    tool_node.__doc__ = f"Run a call of tool {spec.name!r}."
    return tool_node


_Called = tuple[str, str, dict[str, Any]]
"""A call's result text, its status (``"ok"``/``"error"``) and its node record's outcome."""


async def _called(
    plan: Plan,
    spec: ToolSpec,
    call: PendingCall,
    ctx: NodeContext,
    inline: bool,
    seen: Callable[[Exception], Awaitable[None]] | None = None,
) -> _Called | Command:
    """Run the call's tool; return its result, or the route its failure takes.

    ``seen`` is told of the tool's error before its route or its message is made (the
    middleware's ``on_tool_error``).
    """
    try:
        with tool_span(spec.name, call.id):
            found = await _run_tool(plan, spec, call, ctx, inline)
        content = mask(to_text(found))
        return content, "ok", {"status": "completed", "output": content}
    except _BadCall as bad:
        text = bad.text
        return (
            text,
            "error",
            {"status": "completed", "has_error": True, "error": text, "output": text},
        )
    except Exception as error:
        if _retried(spec, error, ctx) or isinstance(error, _CALLERS_TO_FIX):
            raise
        if seen is not None:
            await seen(error)
        routed = _failure(plan, spec, error, ctx)
        if routed is not None:
            if isinstance(routed.update, dict):
                routed.update["results"] = {call.id: _error_result(plan, spec, error)}
            return routed
        text = _error_result(plan, spec, error).content
        return text, "error", {"status": "failed", "has_error": True, "error": text, "output": text}


async def _hooked(
    hooks: tuple[Middleware, ...],
    plan: Plan,
    spec: ToolSpec,
    call: PendingCall,
    ctx: NodeContext,
    state: Any,
    inline: bool,
) -> _Called | Command:
    """Run the call through the middleware's tool hooks: ``before_tool`` may change its
    arguments or answer it without the tool, ``on_tool_error`` sees the tool's error, and
    ``after_tool`` may change its result. A failure that an edge routes goes there as is.
    """
    ran: list[_Called | Command] = []

    async def run(edited: ToolCall, seen: Callable[[Exception], Awaitable[None]]) -> ToolMessage:
        changed = (
            call if edited.args == call.args else call.model_copy(update={"args": edited.args})
        )
        found = await _called(plan, spec, changed, ctx, inline, seen)
        ran.append(found)
        if isinstance(found, Command):  # routed: the tool's error text is its result
            text, status = _routed_result(found, call.id), "error"
        else:
            text, status, _ = found
        return ToolMessage(content=text, tool_call_id=call.id, name=call.name, status=status)

    asked = ToolCall(name=call.name, args=dict(call.args), id=call.id)
    message = await hooked_tool_call(hooks, ctx, state, (asked,), 0, run)
    text, status = mask(to_text(message.content)), message.status  # a hook's text too
    if not ran:  # answered by before_tool (ctx.respond, ctx.refuse): the tool did not run
        outcome = {"status": "completed", "has_error": status == "error", "output": text}
        return text, status, outcome | ({"error": text} if status == "error" else {})
    found = ran[0]
    if isinstance(found, Command):
        return found
    outcome = {**found[2], "output": text}
    if outcome.get("has_error"):
        outcome["error"] = text
    return text, status, outcome


def _routed_call(spec: ToolSpec, call: PendingCall, routed: Command) -> Command:
    """Return the route of a call's failure with the call in it.

    The tool's record keeps the call's input, and the error text the model is shown as
    its output, as a failure that goes back to the model does. The target's input is
    keyed and ordered by the call, so two failures of one reply both reach it, in the
    order of the calls.
    """
    update = routed.update if isinstance(routed.update, dict) else {}
    text = _routed_result(routed, call.id)
    nodes = update["nodes"]
    kept = {"input": {"name": call.name, "args": call.args}, "output": text}
    nodes[spec.name] = nodes[spec.name].model_copy(update=kept)
    update["inbox"] = {
        f"{spec.name}:{call.id}": delivery.model_copy(update={"order": call.index})
        for delivery in update["inbox"].values()
    }
    return routed


def _routed_result(routed: Command, call_id: str) -> str:
    update = routed.update if isinstance(routed.update, dict) else {}
    result = update.get("results", {}).get(call_id)
    return result.content if isinstance(result, CallResult) else ""


def _recorded(spec: ToolSpec, call: PendingCall, stored: dict[str, Any]) -> _Called | Command:
    """Return the result a replayed call's task stored, for the node to route afresh.

    A call whose tool raised comes back whole, as its task stored it (its route too): the
    error that decided the route is not stored, only its text.
    """
    result = stored["results"][call.id]
    record = stored["nodes"][spec.name]
    if record.get("status") == "failed":
        inbox = stored.get("inbox")
        delivery = inbox.get(f"{spec.name}:{call.id}") if isinstance(inbox, dict) else None
        target = delivery.get("to") if isinstance(delivery, dict) else None
        routed = [n for n, r in stored["nodes"].items() if r.get("status") == "running"]
        goto = [target] if isinstance(target, str) else routed[:1] or [call.caller]
        return Command(update=stored, goto=goto)
    keys = ("status", "has_error", "error", "output")
    outcome = {key: record[key] for key in keys if key in record}
    return str(result.get("content", "")), str(result.get("status", "ok")), outcome


class _BadCall(Exception):
    """A call whose arguments do not fit: answered to the model, never a failure."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _retried(spec: NodeSpec, error: Exception, ctx: NodeContext) -> bool:
    policy = spec.options.get("retry")
    return policy is not None and ctx.attempt < policy.attempts and policy.retries(error)


def _error_result(plan: Plan, spec: ToolSpec, error: Exception) -> CallResult:
    guard = plan.guards.get(spec.name)
    told = guard.answer(error) if guard is not None else None  # a refusal, a timeout
    text = mask(told or f"Error: {spec.name} raised {type(error).__name__}: {error}")
    return CallResult(content=text, tool=spec.name, status="error")


async def _run_tool(
    plan: Plan, spec: ToolSpec, call: PendingCall, ctx: NodeContext, inline: bool
) -> Any:
    run: Callable[[], Awaitable[Any]]
    if spec.tool is not None:  # a Tool object: it checks its own arguments
        try:
            spec.tool.validate(dict(call.args))
        except ValidationError as error:
            raise _BadCall(_bad_text(spec.name, error)) from None
        args = dict(call.args)
        run = partial(spec.tool.ainvoke, args, inline=inline, ctx=ctx, call_id=call.id)
    else:
        try:
            checked = validator(plan.checkers[spec.name])(call.args)
        except ValidationError as error:
            raise _BadCall(_bad_text(spec.name, error)) from None
        run = partial(plan.callers[spec.name].call, to_kwargs(checked), ctx, inline=inline)
    guard = plan.guards.get(spec.name)  # a call that does not fit is not counted
    return await (run() if guard is None else guard.call(run))


def _bad_text(name: str, error: ValidationError) -> str:
    return (
        f"Error: the arguments of {name} are not valid: {argument_problem(error)}. Call it "
        f"again with arguments that fit its parameters."
    )


def function_step(plan: Plan, spec: NodeSpec) -> NodeFn:
    """Return the function of FunctionNode or Node ``spec``: its Python function."""
    caller = plan.callers[spec.name]
    guard = plan.guards.get(spec.name)

    async def function_node(state: Any, ctx: NodeContext) -> Command:
        try:
            if guard is None:
                return await _step(state, ctx)
            return await guard.call(partial(_step, state, ctx))
        except Exception as error:
            routed = _failure(plan, spec, error, ctx)
            if routed is None:
                raise
            return routed

    async def _step(state: Any, ctx: NodeContext) -> Command:
        taken = _inbox(state, spec.name)
        value = _JOIN.join(d.text for _, d in taken)
        kwargs = {caller.first: value} if caller.first is not None else {}
        text = mask(to_text(await caller.call(kwargs, ctx)))
        update: dict[str, Any] = {"inbox": {key: None for key, _ in taken}, "nodes": {}}
        record = plan.record(spec.name, status="completed", input=value, output=text)
        update["nodes"][spec.name] = record
        goto = _onward(plan, spec, text, ctx, f"{spec.name}:{ctx.step}", update)
        return Command(update=_written(update), goto=goto)

    function_node.__doc__ = f"Run the func of {spec.kind} {spec.name!r}."
    return function_node
