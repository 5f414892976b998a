"""``Agent``: a folder of specs run one step at a time, durably, as an ordinary ``Graph``.

Each ``step`` is one run of the agent's graph on its thread: the execution id is the
thread id. The conversation, each node's record and the tool results waiting for their
model all live in the thread's state (see ``records``), so any nodestep store keeps
them, and a new ``Agent`` on the same store continues a conversation by its id.

The call's ``context=`` is passed to the run and never stored; the text a node stores
after seeing it is masked first (``masking``), and so is a failure's message. What a step
gives back (``AgentStep``, ``NodeState``, the streamed events) is in ``outcomes``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from nodestep._declarative.yaml_tree import Problems
from nodestep._display.views import agent_html
from nodestep._engine.interrupts import Resume
from nodestep._engine.results import StreamEvent
from nodestep._errors import (
    GraphConfigError,
    ResumeError,
    StateStoreError,
    ThreadBusyError,
    ThreadConflictError,
)
from nodestep._flow.credentials import CredentialsProvider
from nodestep._flow.middleware import Middleware
from nodestep._graph.graph import Graph
from nodestep._graph.sync_form import iterate_form, sync_form
from nodestep._state.json import to_json_value
from nodestep._state.schema import StoredFieldsMismatch
from nodestep.agents._models import ChatModel
from nodestep.agents._specs.building import build_graph
from nodestep.agents._specs.functions import Functions, check_functions
from nodestep.agents._specs.kinds import LLMSpec
from nodestep.agents._specs.manifests import Specs, read_specs
from nodestep.agents._specs.masking import Masks, mask, masked, texts_of
from nodestep.agents._specs.outcomes import AgentEvent, AgentStep, NodeState, ended, ended_early
from nodestep.agents._specs.records import Delivery, NodeRecord
from nodestep.agents._specs.streaming import STEP_MODES, events_of
from nodestep.store import InMemoryStateStore, StateStore, open_store

__all__ = ["Agent"]

_KINDS = ("LLMNode", "ToolNode", "FunctionNode", "Node")
_NO_ANSWER: Any = object()


class Agent:
    """Run a folder of Liman-format specs as a durable agent, one ``step`` at a time.

    The folder holds YAML documents of the kinds ``LLMNode``, ``ToolNode``,
    ``FunctionNode``, ``Node`` and ``ServiceAccount``, read recursively. The constructor
    loads and checks all of them, and raises every problem at once, with its file and
    line; nothing is half-loaded.

    Args:
        specs_dir: The folder of specs.
        start_node: The node a step starts at: an LLMNode's name, or ``"<Kind>/<name>"``
            (``"LLMNode/chat"``).
        llm: The chat model of the LLMNodes (a ``ChatModel``: ``ScriptedModel``,
            ``OpenAIChatModel``, ...).
        state_store: Where conversations are kept: a store, a store URL
            (``"sqlite:///agent.db"``), or ``None`` for memory.
        functions: What ``func:`` strings and a ``when:``'s function names resolve to: a
            dict from the exact string to the callable, or a module (its attribute named
            by the string's last dotted part). It wins over an import.
        tools: Tools made with ``openapi_tools(...)`` (each a ToolNode named
            ``OpenAPI__<operationId>``) or ``@tool`` (named as the tool).
        credentials: The ``CredentialsProvider`` of the service accounts' providers (each
            provider's name is a role); ``step(credentials=...)`` wins over it.
        allowed_packages: Only import ``func:`` code from these packages; ``None`` allows any.
        max_steps: The most supersteps one step may take (each tool round takes two).
        name: The agent's name, in errors and history.
        middleware: ``Middleware`` around each step, node, model call and tool call, as
            ``Graph(middleware=...)`` and ``create_react_agent`` run it (see the
            middleware docs): ``before_model`` and ``after_model`` around each LLMNode's
            call, ``before_tool``, ``on_tool_error`` and ``after_tool`` around each
            ToolNode's.

    Raises:
        GraphConfigError: the folder's problems (each at its file and line), an unknown
            start node, or an argument of the wrong kind.
    """

    def __init__(
        self,
        specs_dir: str | os.PathLike[str],
        start_node: str,
        *,
        llm: ChatModel,
        state_store: StateStore | str | None = None,
        functions: Mapping[str, Callable[..., Any]] | ModuleType | None = None,
        tools: Sequence[Any] = (),
        credentials: CredentialsProvider | None = None,
        allowed_packages: Sequence[str] | None = None,
        max_steps: int = 50,
        name: str = "agent",
        middleware: Sequence[Middleware] = (),
    ) -> None:
        if not isinstance(llm, ChatModel):
            raise GraphConfigError(
                f"Agent(llm=...) takes a chat model (ScriptedModel, OpenAIChatModel, or an "
                f"object with a name and async complete() and stream()), got "
                f"{type(llm).__name__}."
            )
        problems = Problems()
        resolver = Functions(check_functions(functions), allowed_packages, problems)
        self._specs: Specs = read_specs(Path(specs_dir), resolver, tools)
        self._start = _start(self._specs, start_node)
        self._store = _store(state_store)
        self._owns_store = not isinstance(state_store, StateStore)
        self._credentials = credentials
        self._current: str | None = None
        self._graph, plan = build_graph(
            self._specs,
            self._start,
            llm,
            name=name,
            max_steps=max_steps,
            state_store=self._store,
            redact=mask,
            middleware=list(middleware),
        )
        self._fields = plan.fields
        self._plan = plan

    @property
    def graph(self) -> Graph[Any]:
        """The agent's ``Graph``: its threads are the conversations (history, fork, ...)."""
        return self._graph

    @property
    def execution_id(self) -> str | None:
        """The conversation a step without ``execution_id=`` continues, or ``None``."""
        return self._current

    @property
    def start_node(self) -> str:
        """The name of the node each step starts at."""
        return self._start

    async def step(
        self,
        input: str | None = None,
        *,
        context: Mapping[str, Any] | None = None,
        execution_id: str | None = None,
        credentials: CredentialsProvider | None = None,
        resume: Any = _NO_ANSWER,
    ) -> AgentStep:
        """Send ``input`` to the start node and run until a node gives the step's output.

        Args:
            input: The user's text; ``None`` only with ``resume=``.
            context: Call-time data, never stored: ``lang`` picks the prompts'
                language (``en`` by default), ``when:`` conditions read it by name, and
                service accounts inject from it.
            execution_id: The conversation to continue; ``None`` continues the last one
                this agent stepped, or starts one.
            credentials: The provider of the service accounts' credentials, for this step.
            resume: The answer to a paused step's interrupt: a value, or a ``Resume``
                (``Resume(answers={key: value})`` for several). The paused nodes go on
                from where they asked, and the step returns as any step does.

        Returns:
            The ``AgentStep``. A node's failure does not raise: the step returns
            ``status="failed"`` with the error, and the conversation goes on at the next
            step.

        Raises:
            GraphConfigError: ``input`` is not a string (or is given with ``resume=``),
                ``execution_id`` is not a non-empty string, ``context["lang"]`` is
                not a string, or ``context`` holds more than 100,000 values (too many
                to mask); or the conversation was stored by an agent with other
                LLMNodes (refused before anything runs; see ``_refuse_other_agents``).
            ResumeError: text was sent to a paused conversation, or ``resume=`` to one
                that is not paused; the message says which interrupts wait.
        """
        call = self._call("step", input, context, execution_id, resume)
        with masked(call.masks):
            try:
                result = await self._graph.ainvoke(
                    call.patch,
                    thread_id=call.thread,
                    context=call.context,
                    credentials=credentials or self._credentials,
                    resume=call.answer,
                )
            except ResumeError as error:
                raise _resume_error(call.thread, error, paused=call.answer is None) from None
            except Exception as error:
                self._refuse_other_agents(call.thread, error)
                return await self._failed(call.thread, error)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._stopped(call.thread)
                raise
        pending = result.interrupts if result.status == "interrupted" else None
        return ended(call.thread, result.state, result.run_id, pending)

    async def stream(
        self,
        input: str | None = None,
        *,
        context: Mapping[str, Any] | None = None,
        execution_id: str | None = None,
        credentials: CredentialsProvider | None = None,
        resume: Any = _NO_ANSWER,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a step as ``step`` does, and yield what happens while it runs.

        Each LLMNode asks its model with ``stream()`` and each piece of its reply comes as
        an ``AgentToken``; each tool call of a reply as an ``AgentToolCall`` once the reply
        is whole; each call's result as an ``AgentToolResult``. The last item is the
        step's ``AgentStep``, as ``step`` returns it (a failed step's too). Leaving the
        loop early stops the step; the conversation goes on at the next one.

        Args:
            input: As for ``step``.
            context: As for ``step``.
            execution_id: As for ``step``.
            credentials: As for ``step``.
            resume: As for ``step``.

        Raises:
            GraphConfigError: as ``step``.
            ResumeError: as ``step``.
        """
        call = self._call("stream", input, context, execution_id, resume)
        events = self._graph.astream(
            call.patch,
            stream_mode=STEP_MODES,
            thread_id=call.thread,
            context=call.context,
            credentials=credentials or self._credentials,
            resume=call.answer,
        )
        end: AgentStep | None = None
        try:
            while end is None:
                # The run's task starts at the first event, in a copy of the masks set here.
                with masked(call.masks):
                    event, end = await self._next(call, events)
                for item in events_of(event, self._fields) if event is not None else ():
                    yield item
        except BaseException as stop:
            with anyio.CancelScope(shield=True):
                await events.aclose()
                if isinstance(stop, GeneratorExit | anyio.get_cancelled_exc_class()):
                    await self._stopped(call.thread)
            raise
        yield end

    stream_sync = iterate_form(stream)

    def _call(
        self,
        verb: str,
        text: str | None,
        context: Mapping[str, Any] | None,
        execution_id: str | None,
        resume: Any,
    ) -> _Call:
        """Check a step's arguments and return what its run is given."""
        if resume is not _NO_ANSWER and text is not None:
            raise GraphConfigError(
                f"Agent.{verb} takes the user's text or resume=, not both: answer the paused "
                f"step with {verb}(resume=...), then send the text with the next step."
            )
        if resume is _NO_ANSWER and not isinstance(text, str):
            raise GraphConfigError(
                f"Agent.{verb} takes the user's text as a string, got {type(text).__name__}; "
                f"to answer a paused step, pass {verb}(resume=answer)."
            )
        _check_execution_id(f"Agent.{verb}", execution_id)
        call_context = dict(context) if context is not None else {}
        _check_lang(f"Agent.{verb}", call_context.get("lang"))
        masks = Masks(texts_of(call_context))  # first: a context it refuses starts nothing
        thread = execution_id or self._current or uuid.uuid4().hex
        self._current = thread
        if resume is not _NO_ANSWER:
            answer = resume if isinstance(resume, Resume) else Resume(resume)
            return _Call(thread, call_context, masks, None, answer)
        return _Call(thread, call_context, masks, self._patch(text or ""), None)

    def _patch(self, text: str) -> dict[str, Any]:
        start = self._start
        return {
            "inbox": {"input": Delivery(to=start, text=text)},
            "nodes": {start: self._plan.running_record(start)},
        }

    def step_input(self, text: str) -> dict[str, Any]:
        """Return the input of ``agent.graph`` that sends ``text`` as a step does, as JSON.

        For code that runs the agent's graph itself (``agent.graph.astream(...)``, a
        served agent): the text goes to the start node, which is marked running.

        Raises:
            GraphConfigError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise GraphConfigError(
                f"Agent.step_input takes the user's text as a string, got {type(text).__name__}."
            )
        patch: dict[str, Any] = to_json_value(self._patch(text), what="a step's input")
        return patch

    async def _next(
        self, call: _Call, events: AsyncGenerator[StreamEvent, None]
    ) -> tuple[StreamEvent | None, AgentStep | None]:
        """Return a streamed step's next event, and its ``AgentStep`` once it has ended."""
        try:
            event = await anext(events)
            if event.mode not in ("final", "interrupt"):
                return event, None
            with contextlib.suppress(StopAsyncIteration):
                await anext(events)  # the run's own end: nothing, or its error
        except StopAsyncIteration:
            return None, await self._failed(call.thread, ended_early(call.thread))
        except ResumeError as error:
            raise _resume_error(call.thread, error, paused=call.answer is None) from None
        except Exception as error:
            self._refuse_other_agents(call.thread, error)
            return None, await self._failed(call.thread, error)
        pending = event.data.interrupts if event.mode == "interrupt" else None
        return event, ended(call.thread, event.data.state, event.run_id, pending)

    async def _stopped(self, thread: str) -> None:
        """Record a step stopped before its end (cancelled, its stream closed) as failed."""
        message = "Stopped: the step was cancelled, or its stream closed, before it ended."
        with contextlib.suppress(Exception):  # as in _failed: the records say running
            await self._record_failure(thread, message)

    async def _failed(self, thread: str, error: Exception) -> AgentStep:
        """Record a failed step in the failed nodes' records, and clear its inputs."""
        message = mask(f"{type(error).__name__}: {error}")
        try:
            failed = {} if _taken(message) else await self._record_failure(thread, message)
        except Exception:
            # The store refuses even this (it is down, say): the step still reports its
            # failure, and the records say "running" until the next step.
            failed = {}
        return AgentStep(
            output="",
            execution_id=thread,
            status="failed",
            error=message,
            failed_nodes=tuple(sorted(failed)),
        )

    async def record_failure(
        self,
        execution_id: str,
        error: Exception | str,
        *,
        context: Any = None,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> tuple[str, ...]:
        """Record a failed run of ``agent.graph`` as a failed ``step`` records it.

        For code that runs the agent's graph itself (a served agent): the nodes the run
        left running are marked failed with the error (``has_error``, ``error``), and the
        step's undelivered inputs are cleared, so the next step starts clean. A
        ``ThreadBusyError`` or ``ThreadConflictError`` (or a text that starts with either
        name and a colon) records nothing: another writer holds or wrote the
        conversation, and its nodes' records are that writer's.

        Args:
            execution_id: The conversation (the run's thread).
            error: What failed the run: the exception, or its text.
            context: The run's call context: its values are masked in the stored error,
                as a step masks them.
            branch_id: The thread's branch the run ran on.
            state_store: The store the run used, if not the agent's own.

        Returns:
            The names of the nodes marked failed.
        """
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if _taken(message):
            return ()
        message = Masks(texts_of(context)).apply(message)
        failed = await self._record_failure(execution_id, message, branch_id, state_store)
        return tuple(sorted(failed))

    async def _record_failure(
        self,
        thread: str,
        message: str,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> dict[str, Any]:
        where: dict[str, Any] = {"branch_id": branch_id, "state_store": state_store}
        state = (await self._graph.get_state(thread, **where)).value
        failed = {
            name: record.model_copy(
                update={"status": "failed", "has_error": True, "error": message}
            )
            for name, record in state.nodes.items()
            if record.status == "running"
        }
        inbox = {key: None for key in state.inbox}
        await self._graph.update_state(thread, {"nodes": failed, "inbox": inbox}, **where)
        return failed

    async def node_state(self, name: str, *, execution_id: str | None = None) -> NodeState:
        """Return node ``name``'s state in a conversation.

        Args:
            name: The node's name.
            execution_id: The conversation; ``None`` reads the one the agent stepped last.

        Returns:
            The ``NodeState``: ``idle`` and empty when the node never ran there.

        Raises:
            GraphConfigError: no node has that name, ``execution_id`` is not a
                non-empty string, or the conversation was stored by an agent with other
                LLMNodes.
        """
        spec = self._specs.nodes.get(name)
        if spec is None:
            known = ", ".join(sorted(self._specs.nodes))
            raise GraphConfigError(f"The agent has no node {name!r}; its nodes are {known}.")
        _check_execution_id("Agent.node_state", execution_id)
        thread = execution_id or self._current
        if thread is None or not await self._graph.exists(thread):
            return NodeState(name, spec.kind)
        try:
            state = (await self._graph.get_state(thread)).value
        except StateStoreError as error:
            self._refuse_other_agents(thread, error)
            raise
        record = state.nodes.get(name) or NodeRecord(kind=spec.kind)
        messages = tuple(getattr(state, self._fields[name])) if name in self._fields else ()
        return NodeState(
            name=name,
            kind=spec.kind,
            status=record.status,
            has_error=record.has_error,
            error=record.error,
            messages=messages,
            input=record.input,
            output=record.output,
        )

    def _refuse_other_agents(self, thread: str, error: Exception) -> None:
        """Raise the error that says ``thread`` is another agent's, when ``error`` says so.

        Why here: a store keys conversations by execution id alone, and the state of an
        agent has a field per LLMNode, so loading a conversation of an agent with other
        LLMNodes fails before anything runs, with a store error that advises a migration.
        That load is the step's own first read, so the check costs nothing more.

        Raises:
            GraphConfigError: the stored state holds fields this agent's state lacks.
        """
        fields = _unknown_fields(error)
        if fields is None:
            return
        held = ", ".join(
            f"{f!r} (the conversation of an LLMNode {f.removeprefix('conversation_')!r})"
            if f.startswith("conversation_")
            else repr(f)
            for f in fields
        )
        nodes = ", ".join(sorted(self._specs.nodes))
        name = self._graph.name
        raise GraphConfigError(
            f"Conversation {thread!r} was stored by an agent with other nodes: it holds "
            f"{held}, which agent {name!r} (nodes {nodes}) does not have. A store keys "
            f"conversations by execution_id alone, so two agents on one store need "
            f"execution ids of their own, such as '{name}-{thread}', or a store each. "
            f"(If this agent is a new version of that one, without those nodes, migrate "
            f"the conversation with agent.graph.migrate.)"
        ) from error

    async def aclose(self) -> None:
        """Close the store the agent opened (from a URL, or its memory store).

        A store passed in as an object is the caller's: it stays open.
        """
        if self._owns_store:
            await self._store.aclose()

    step_sync = sync_form(step)
    node_state_sync = sync_form(node_state)
    aclose_sync = sync_form(aclose)

    def __repr__(self) -> str:
        return f"Agent({self._graph.name!r}, start_node={self._start!r})"

    def _repr_html_(self) -> str:
        nodes = [(name, spec.kind) for name, spec in self._specs.nodes.items()]
        svg = self._graph.to_svg()
        return agent_html(self._graph.name, self._start, nodes, repr(self._store), svg)


@dataclass(frozen=True)
class _Call:
    """What one step's run is given: its thread, context, masks, and input or answer."""

    thread: str
    context: dict[str, Any]
    masks: Masks
    patch: dict[str, Any] | None
    answer: Resume | None


_TAKEN = tuple(f"{error.__name__}:" for error in (ThreadBusyError, ThreadConflictError))


def _check_execution_id(where: str, execution_id: Any) -> None:
    """Refuse an ``execution_id`` that is neither ``None`` nor a conversation's id.

    An empty string is refused rather than read as ``None``: a caller that passes
    ``""`` (an unset id from a form or a header) means some conversation, and carrying
    on the last one stepped would answer in another user's conversation.
    """
    if execution_id is None or (isinstance(execution_id, str) and execution_id):
        return
    raise GraphConfigError(
        f"{where} takes execution_id as a non-empty string, got {execution_id!r}: pass "
        f"the execution_id of an earlier step (step.execution_id) or a new name such as "
        f"'user-42', or leave it out for the conversation this agent stepped last."
    )


def _check_lang(where: str, lang: Any) -> None:
    """Refuse a ``context["lang"]`` that is not text, which no bundle could be keyed by."""
    if lang is None or isinstance(lang, str):
        return
    raise GraphConfigError(
        f"{where}: context['lang'] is a language code such as 'en', 'ru' or 'ru-RU', got "
        f"{lang!r}; pass the code as a string, or leave it out for English."
    )


def _unknown_fields(error: BaseException) -> list[str] | None:
    """Return the stored fields the agent's state lacks, when ``error`` is the store's
    refusal to load them (a ``StateStoreError`` caused by ``StoredFieldsMismatch``)."""
    if not isinstance(error, StateStoreError):
        return None
    cause = error.__cause__
    return cause.fields if isinstance(cause, StoredFieldsMismatch) else None


def _taken(message: str) -> bool:
    """Tell whether a run failed because another writer holds or wrote the conversation.

    The nodes' records are then the other writer's: a node of theirs that is paused (or
    still running) reads ``running`` too, and must not be marked failed.
    """
    return message.startswith(_TAKEN)


def _resume_error(thread: str, error: ResumeError, *, paused: bool) -> ResumeError:
    """Say the engine's refusal in the agent's terms: ``step(resume=...)``, not ``invoke``."""
    waiting = ", ".join(repr(key) for key in error.pending)
    if paused and error.pending:
        return ResumeError(
            f"Conversation {thread!r} is paused: a node waits for an answer to {waiting}. "
            f"Answer it with agent.step(resume=answer) (the step's interrupts say what "
            f"is asked), then send the text.",
            error.pending,
        )
    if not paused and not error.pending:
        return ResumeError(
            f"Conversation {thread!r} is not paused: resume= answers a paused step's "
            f"interrupt. Send the user's text with agent.step(text) instead."
        )
    return ResumeError(f"Conversation {thread!r}: {error}", error.pending)


def _start(specs: Specs, start_node: Any) -> str:
    if not isinstance(start_node, str):
        raise GraphConfigError(f"start_node takes a node's name, got {start_node!r}.")
    kind, slash, name = start_node.rpartition("/")
    if not slash:
        kind = "LLMNode"
    spec = specs.nodes.get(name)
    if kind in _KINDS and spec is not None and spec.kind == kind:
        return name
    llms = sorted(n for n, s in specs.nodes.items() if isinstance(s, LLMSpec))
    raise GraphConfigError(
        f"Unknown start node {start_node!r}: the start node is an LLMNode's name or "
        f"'<Kind>/<name>'; the LLMNodes are {', '.join(llms) or 'none'}."
    )


def _store(state_store: Any) -> StateStore:
    if state_store is None:
        return InMemoryStateStore()
    if isinstance(state_store, str):
        return open_store(state_store)
    if isinstance(state_store, StateStore):
        return state_store
    raise GraphConfigError(
        f"Agent(state_store=...) takes a store, a store URL such as 'sqlite:///agent.db', "
        f"or None, got {type(state_store).__name__}."
    )
