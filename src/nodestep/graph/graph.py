"""``Graph``: a state type, its nodes and flow, and the ways to run it and read its threads."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from nodestep import _ids
from nodestep.engine.cache import PositionCache
from nodestep.engine.loop import RunRequest, execute
from nodestep.engine.results import GraphResult, StreamEvent, result_of, stream_modes
from nodestep.engine.sync import drive_stream, no_running_loop, run_sync
from nodestep.errors import GraphConfigError
from nodestep.graph.drawing import to_mermaid, to_spec
from nodestep.graph.nodes import _NO_CONTEXT, Node
from nodestep.graph.thread_methods import ThreadMethods
from nodestep.graph.validation import Flow, compile_flow
from nodestep.state.schema import StateSchema
from nodestep.store.base import StateStore

__all__ = ["Graph"]

S = TypeVar("S", bound=BaseModel)


def _names(nodes: Iterable[Node | str] | None, what: str) -> frozenset[str]:
    if nodes is None:
        return frozenset()
    if isinstance(nodes, Node | str):
        nodes = [nodes]
    out = set()
    for n in nodes:
        if isinstance(n, Node):
            out.add(n.name)
        elif isinstance(n, str):
            out.add(n)
        else:
            raise TypeError(f"{what} takes nodes or node names, got {n!r}.")
    return frozenset(out)


class Graph(ThreadMethods[S]):
    """A graph over a state type: nodes that read the state and return updates.

    Build it, then declare the flow in one ``flow()`` call::

        graph = Graph(Poll).flow(START >> tally, tally >> END)

    Args:
        state: The state class (a ``BaseState`` subclass); every field needs a default.
        name: Used in errors, events and the drawing.
        max_steps: The superstep limit of one call; a call that needs more raises
            ``RunLimitExceededError``. A continuation starts a new count.
        timeout: Seconds one call may spend inside supersteps, or ``None``.
        state_store: Where threads keep their history; ``None`` keeps nothing.
        interrupt_before: Nodes to pause before (static breakpoints).
        interrupt_after: Nodes to pause after.

    Raises:
        GraphConfigError: the state class cannot be compiled (e.g. two reducers on a field).
    """

    def __init__(
        self,
        state: type[S],
        *,
        name: str = "graph",
        max_steps: int = 25,
        timeout: float | None = None,
        state_store: StateStore | None = None,
        interrupt_before: Sequence[Node | str] | None = None,
        interrupt_after: Sequence[Node | str] | None = None,
    ) -> None:
        if not isinstance(max_steps, int) or max_steps < 1:
            raise GraphConfigError(f"max_steps must be a positive int, got {max_steps!r}.")
        if timeout is not None and (
            not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0
        ):
            raise GraphConfigError(
                f"timeout must be a positive number of seconds, got {timeout!r}."
            )
        if state_store is not None and not isinstance(state_store, StateStore):
            raise GraphConfigError(
                f"state_store must be a StateStore, got {type(state_store).__name__}."
            )
        self.state = state
        self.name = name
        self.max_steps = max_steps
        self.timeout = float(timeout) if timeout is not None else None
        self.state_store = state_store
        self.schema = StateSchema.of(state)
        self.interrupt_before = _names(interrupt_before, "interrupt_before")
        self.interrupt_after = _names(interrupt_after, "interrupt_after")
        self._flow: Flow | None = None
        self._positions = PositionCache()
        # Injected by tests for deterministic histories; see nodestep._ids.
        self._new_id = _ids.new_id
        self._clock = _ids.system_clock

    # -- building -------------------------------------------------------------------------

    def flow(self, *edges: Any) -> Graph[S]:
        """Declare the flow: ``START >> a``, ``a >> b``, ``a >> when(...)``, ``b >> END``.

        Returns:
            The graph itself.

        Raises:
            GraphConfigError: listing every problem: no or several START edges, a node with
                no way out, a node unreachable from START, two edges from one node, two
                different nodes with one name, a goto name that matches nothing, a second
                ``flow()`` call.
        """
        if self._flow is not None:
            raise GraphConfigError(
                f"Graph '{self.name}' already has a flow; flow() is called once with every "
                f"edge. Build a new Graph for another flow.",
                [f"Graph '{self.name}' already has a flow; call flow() once"],
            )
        compiled = compile_flow(self.name, edges)
        unknown = sorted((self.interrupt_before | self.interrupt_after) - set(compiled.nodes))
        if unknown:
            raise GraphConfigError(f"Breakpoints name unknown nodes: {', '.join(unknown)}.")
        self._flow = compiled
        return self

    @property
    def _compiled(self) -> Flow:
        if self._flow is None:
            raise GraphConfigError(
                f"Graph '{self.name}' has no flow yet; call graph.flow(START >> first, ...) first."
            )
        return self._flow

    @property
    def nodes(self) -> dict[str, Node]:
        """The nodes of the flow, by name."""
        return self._compiled.nodes

    @property
    def edges(self) -> dict[str, Any]:
        """What follows each node: a node name, ``END``, a ``When`` or a ``Branch``."""
        return self._compiled.edges

    @property
    def declared(self) -> dict[str, frozenset[str]]:
        """The dynamic targets each node declared with ``@node(goto=[...])``."""
        return self._compiled.declared

    @property
    def start(self) -> str:
        """The name of the node after ``START``."""
        return self._compiled.start

    # -- running ----------------------------------------------------------------------------

    def _request(
        self,
        input: Any,
        *,
        thread_id: str | None,
        branch_id: str,
        resume: Any,
        context: Any,
        state_store: StateStore | None,
        modes: frozenset[str],
        interrupt_before: Sequence[Node | str] | None,
        interrupt_after: Sequence[Node | str] | None,
    ) -> RunRequest:
        self._compiled  # noqa: B018 - fail early without a flow
        if thread_id is not None and (not isinstance(thread_id, str) or not thread_id):
            raise GraphConfigError(f"thread_id must be a non-empty string, got {thread_id!r}.")
        if not isinstance(branch_id, str) or not branch_id:
            raise GraphConfigError(f"branch_id must be a non-empty string, got {branch_id!r}.")
        before = self.interrupt_before
        if interrupt_before is not None:
            before = self._breakpoints(interrupt_before, "interrupt_before")
        after = self.interrupt_after
        if interrupt_after is not None:
            after = self._breakpoints(interrupt_after, "interrupt_after")
        return RunRequest(
            input=input,
            thread_id=thread_id,
            branch_id=branch_id,
            resume=resume,
            context=context,
            store=state_store if state_store is not None else self.state_store,
            modes=modes,
            interrupt_before=before,
            interrupt_after=after,
        )

    def _breakpoints(self, nodes: Sequence[Node | str], what: str) -> frozenset[str]:
        names = _names(nodes, what)
        unknown = sorted(names - set(self._compiled.nodes))
        if unknown:
            raise GraphConfigError(
                f"{what} names {', '.join(repr(n) for n in unknown)}, which graph "
                f"'{self.name}' does not have. Its nodes: {', '.join(self._compiled.nodes)}."
            )
        return names

    async def ainvoke(
        self,
        input: dict[str, Any] | S | None = None,
        *,
        thread_id: str | None = None,
        branch_id: str = "main",
        resume: Any = None,
        context: Any = _NO_CONTEXT,
        state_store: StateStore | None = None,
        interrupt_before: Sequence[Node | str] | None = None,
        interrupt_after: Sequence[Node | str] | None = None,
    ) -> GraphResult[S]:
        """Run the graph until it completes or pauses.

        Args:
            input: A dict patch of state fields (or a state instance: the full state);
                ``None`` continues an unfinished superstep of the thread (with a store).
            thread_id: The thread; required with a state store, generated without one.
            branch_id: The history branch, ``"main"`` unless forked.
            resume: ``Resume(...)`` answers to a paused thread's interrupts.
            context: Call-time data for nodes (``ctx.context``); never stored.
            state_store: A store for this call; wins over the graph's.
            interrupt_before: Nodes to pause before, for this call.
            interrupt_after: Nodes to pause after, for this call.

        Returns:
            The ``GraphResult``.
        """
        req = self._request(
            input,
            thread_id=thread_id,
            branch_id=branch_id,
            resume=resume,
            context=context,
            state_store=state_store,
            modes=frozenset(),
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
        )
        last: StreamEvent | None = None
        async for event in execute(self, req):
            last = event
        if last is None:  # pragma: no cover - execute always ends with a terminal event
            raise RuntimeError("the run ended without a terminal event")
        return result_of(last, req.branch_id)

    def invoke(
        self,
        input: dict[str, Any] | S | None = None,
        *,
        thread_id: str | None = None,
        branch_id: str = "main",
        resume: Any = None,
        context: Any = _NO_CONTEXT,
        state_store: StateStore | None = None,
        interrupt_before: Sequence[Node | str] | None = None,
        interrupt_after: Sequence[Node | str] | None = None,
    ) -> GraphResult[S]:
        """Run ``ainvoke`` on a private event loop; see ``ainvoke`` for the arguments.

        Raises:
            RuntimeError: called inside a running event loop; use ``await ainvoke(...)``.
        """
        no_running_loop("invoke")
        result: GraphResult[S] = run_sync(
            self.ainvoke(
                input,
                thread_id=thread_id,
                branch_id=branch_id,
                resume=resume,
                context=context,
                state_store=state_store,
                interrupt_before=interrupt_before,
                interrupt_after=interrupt_after,
            )
        )
        return result

    async def astream(
        self,
        input: dict[str, Any] | S | None = None,
        *,
        stream_mode: str | Sequence[str],
        thread_id: str | None = None,
        branch_id: str = "main",
        resume: Any = None,
        context: Any = _NO_CONTEXT,
        state_store: StateStore | None = None,
        interrupt_before: Sequence[Node | str] | None = None,
        interrupt_after: Sequence[Node | str] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Run the graph and yield ``StreamEvent``s; the last is ``"final"`` or ``"interrupt"``.

        Args:
            stream_mode: Required: ``"updates"``, ``"values"``, ``"custom"``, ``"debug"`` or a
                list of them; ``[]`` yields only the terminal event.
            input: See ``ainvoke``; so are the other arguments.

        Closing the stream early stops the run; with a store, the unfinished superstep can
        be continued with ``invoke(None, thread_id=...)``.
        """
        modes = stream_modes(stream_mode)
        req = self._request(
            input,
            thread_id=thread_id,
            branch_id=branch_id,
            resume=resume,
            context=context,
            state_store=state_store,
            modes=modes,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
        )
        async for event in execute(self, req):
            yield event

    def stream(
        self,
        input: dict[str, Any] | S | None = None,
        *,
        stream_mode: str | Sequence[str],
        thread_id: str | None = None,
        branch_id: str = "main",
        resume: Any = None,
        context: Any = _NO_CONTEXT,
        state_store: StateStore | None = None,
        interrupt_before: Sequence[Node | str] | None = None,
        interrupt_after: Sequence[Node | str] | None = None,
    ) -> Iterator[StreamEvent]:
        """Run ``astream`` on a private event loop; see ``astream`` for the arguments.

        While your loop body handles an event, the graph waits.

        Raises:
            RuntimeError: called inside a running event loop; use ``astream``.
        """
        no_running_loop("stream")
        modes = stream_modes(stream_mode)
        return drive_stream(
            self.astream(
                input,
                stream_mode=sorted(modes),
                thread_id=thread_id,
                branch_id=branch_id,
                resume=resume,
                context=context,
                state_store=state_store,
                interrupt_before=interrupt_before,
                interrupt_after=interrupt_after,
            )
        )

    # -- describing -------------------------------------------------------------------------

    def to_mermaid(self) -> str:
        """Return a Mermaid flowchart of the graph."""
        return to_mermaid(self._compiled)

    def to_spec(self) -> dict[str, Any]:
        """Return the graph as data: state class, nodes and edges, by import path."""
        return to_spec(
            self._compiled,
            name=self.name,
            state=self.state,
            max_steps=self.max_steps,
            timeout=self.timeout,
        )

    def to_json(self) -> str:
        """Return ``to_spec()`` as indented JSON text."""
        return orjson.dumps(self.to_spec(), option=orjson.OPT_INDENT_2).decode()

    def __repr__(self) -> str:
        return f"Graph({self.state.__name__}, name={self.name!r})"
