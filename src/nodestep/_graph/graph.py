"""``Graph``: a state type, its nodes and flow, and the ways to run it and read its threads.

``Graph`` builds (the settings, ``flow()``, a graph used as a node of another) and runs
(``invoke``, ``ainvoke``, ``stream``, ``astream``); it inherits the thread methods
(``get_state``, ``fork``, ...) from ``ThreadMethods``, handing them the graph's services
and store when it is made and its compiled graph when the flow is declared.

The engine never sees the public ``Graph``: a run gets the ``CompiledGraph`` that
``flow()`` builds, and a graph nested in another gets its node form with the child's
compiled graph (``child_graph``, which ``subgraph()`` calls too).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import anyio
import orjson
from pydantic import BaseModel

from nodestep import _ids
from nodestep._display.drawing import SvgLayout, diagram_svg
from nodestep._display.views import graph_html
from nodestep._engine.compiled import CompiledGraph, Sleep, ThreadServices
from nodestep._engine.lease import DEFAULT_TTL
from nodestep._engine.loop import execute
from nodestep._engine.middleware_nodes import wrap_nodes
from nodestep._engine.positions import PositionCache
from nodestep._engine.redact import Redact
from nodestep._engine.request import RunRequest
from nodestep._engine.results import GraphResult, StreamEvent, result_of, stream_modes
from nodestep._engine.step_events import EventSink
from nodestep._engine.streaming import stream_run
from nodestep._engine.subgraph import SubgraphNode
from nodestep._engine.subgraph_map import StateMap
from nodestep._engine.sync import (
    call_sync,
    close_paused,
    iterate_sync,
    stream_key,
    track_paused,
)
from nodestep._errors import GraphConfigError
from nodestep._flow.conditions import compile_conditions
from nodestep._flow.drawing import to_mermaid, to_spec
from nodestep._flow.edges import Chain, Edge
from nodestep._flow.middleware import Middleware, check_middleware
from nodestep._flow.nodes import Node
from nodestep._flow.routing import Command
from nodestep._flow.validation import Flow, check_node_states, compile_flow
from nodestep._graph.idioms import missing_graph_attribute
from nodestep._graph.manifest import manifest_data, manifest_text
from nodestep._graph.options import (
    RunOptions,
    check_memory,
    node_names,
    run_request,
    with_subgraphs,
)
from nodestep._graph.settings import agent_graphs, check_name, check_settings
from nodestep._graph.thread_methods import ThreadMethods, no_flow_yet
from nodestep._memory.contract import MemoryStore
from nodestep._state.schema import StateSchema
from nodestep.store import InMemoryStateStore, StateStore

__all__ = ["Graph", "child_graph"]

S = TypeVar("S", bound=BaseModel)

_NO_EVENTS = EventSink()


class Graph(ThreadMethods[S]):
    """A graph over a state type: nodes that read the state and return updates.

    Build it, then declare the flow in one ``flow()`` call::

        graph = Graph(Poll).flow(START >> tally, tally >> END)

    Args:
        state: The state class (a ``BaseState`` subclass); every field needs a default.
        name: Used in errors, events and the drawing; a non-blank string.
        max_steps: The superstep limit of one call; a call that needs more raises
            ``RunLimitExceededError``. A continuation starts a new count.
        timeout: Seconds one call may spend inside supersteps, or ``None``.
        state_store: Where threads keep their history; ``None`` keeps nothing.
        interrupt_before: Nodes to pause before (static breakpoints).
        interrupt_after: Nodes to pause after.
        id_factory: Makes the ids of history events, runs, generated thread ids and
            branches; the default makes random uuid4 strings. Give a deterministic one
            (``nodestep.testing.sequential_ids()``) to make histories repeatable.
        clock: Stamps history records, as ``time.time`` does (the default).
        redact: Takes the message of a failed run and returns the message to store, after
            the secrets of the run's context are masked (see the errors docs).
        lease_ttl: Seconds a run's hold on its thread lasts unless renewed: a live run
            renews it every third of that, and the thread of a runner that crashed is free
            again after it (see "One writer per thread" in the persistence docs).
        sleep: An async function that waits the given seconds between the attempts of a
            retried node, as ``anyio.sleep`` (the default) does; tests pass
            ``nodestep.testing.FakeTime().sleep`` so they never wait.
        cache_store: Where nodes with ``@node(cache=...)`` keep their results; ``None``
            keeps them in memory, in a store of the graph's own. Any ``StateStore`` works,
            the graph's ``state_store`` too: entries are records of threads of their own.
        memory: A long-term memory store (``nodestep.memory``) its nodes reach as
            ``ctx.memory`` in every thread; a call's ``memory=`` wins over it. It is never
            stored in the history.
        middleware: ``Middleware`` whose hooks run around each run, node, model call and
            tool call, in list order (``after_*`` hooks in reverse); see the middleware
            docs.
        agents: The sub-agents its nodes may spawn by name with ``ctx.spawn``: graphs
            (named by their ``name``), objects with a graph as ``graph``, or a dict from
            name to either (see ``docs/subagents.md``).

    Raises:
        GraphConfigError: a setting cannot work, a ``middleware`` item is no
            ``Middleware``, or the state class cannot be compiled
            (e.g. two reducers on a field, ``add`` on a field that is not a list).
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
        id_factory: _ids.IdFactory | None = None,
        clock: _ids.Clock | None = None,
        redact: Redact | None = None,
        lease_ttl: float = DEFAULT_TTL,
        sleep: Sleep | None = None,
        cache_store: StateStore | None = None,
        memory: MemoryStore | None = None,
        middleware: Sequence[Middleware] | None = None,
        agents: Sequence[Any] | Mapping[str, Any] = (),
    ) -> None:
        check_name(name)
        self._middleware = check_middleware(middleware, f"Graph '{name}'")
        if isinstance(agents, str) or not isinstance(agents, Iterable):
            raise GraphConfigError(
                f"Graph '{name}' got agents={agents!r:.60}; agents= takes a list of graphs "
                f"or a dict from name to graph, e.g. agents=[researcher, writer]."
            )
        # Compiled when the flow is declared: an agent's own flow may come later.
        self._agents = agents
        self._memory = check_memory(memory)
        check_settings(
            max_steps=max_steps,
            timeout=timeout,
            state_store=state_store,
            id_factory=id_factory,
            clock=clock,
            sleep=sleep,
            lease_ttl=lease_ttl,
            cache_store=cache_store,
            redact=redact,
        )
        self._cache_store = cache_store
        self._redact = redact
        self._sleep = sleep or anyio.sleep
        self._state = state
        self._name = name
        self._max_steps = max_steps
        self._timeout = float(timeout) if timeout is not None else None
        self._interrupt_before = node_names(interrupt_before, "interrupt_before")
        self._interrupt_after = node_names(interrupt_after, "interrupt_after")
        self._services = ThreadServices(
            name=name,
            schema=StateSchema.of(state),
            positions=PositionCache(),
            new_id=id_factory or _ids.new_id,
            clock=clock or _ids.system_clock,
            lease_ttl=float(lease_ttl),
        )
        self._compiled: CompiledGraph | None = None
        super().__init__(self._services, state_store)

    if not TYPE_CHECKING:  # for type checkers, a Graph keeps only the attributes it has

        def __getattr__(self, name: str) -> Any:
            # Only a failed lookup gets here: LangGraph's add_node, compile, ... get an
            # AttributeError that names the nodestep way.
            raise missing_graph_attribute(self, name)

    # -- settings ---------------------------------------------------------------------------

    @property
    def memory(self) -> MemoryStore | None:
        """The long-term memory store its nodes reach as ``ctx.memory``, or ``None``."""
        return self._memory

    @property
    def middleware(self) -> tuple[Middleware, ...]:
        """The graph's middleware, in the order their ``before_*`` hooks run."""
        return self._middleware

    @property
    def state(self) -> type[S]:
        """The state class."""
        return self._state

    @property
    def name(self) -> str:
        """The graph's name."""
        return self._name

    @property
    def max_steps(self) -> int:
        """The superstep limit of one call."""
        return self._max_steps

    @property
    def timeout(self) -> float | None:
        """Seconds one call may spend inside supersteps, or ``None``."""
        return self._timeout

    @property
    def interrupt_before(self) -> frozenset[str]:
        """The nodes a run pauses before, unless a call names its own."""
        return self._interrupt_before

    @property
    def interrupt_after(self) -> frozenset[str]:
        """The nodes a run pauses after, unless a call names its own."""
        return self._interrupt_after

    @property
    def schema(self) -> StateSchema:
        """The compiled state class: one channel, validator and JSON form per field."""
        return self._services.schema

    # -- building -------------------------------------------------------------------------

    def flow(self, *edges: Any) -> Graph[S]:
        """Declare the flow: ``START >> a``, ``a >> b``, ``a >> when(...)``, ``b >> END``.

        Edges chain (``START >> a >> b >> END``); ``a >> [b, c]`` runs both after ``a``,
        and the join ``[b, c] >> d`` runs ``d`` once both have run (see ``docs/joins.md``).

        Returns:
            The graph itself.

        Raises:
            GraphConfigError: listing every problem: no or several START edges, a node with
                no way out, a node unreachable from START, two edges from one node, two
                different nodes with one name, a goto name that matches nothing, a plain
                function where a node belongs, a join whose sources cannot all run in one
                turn, a second ``flow()`` call; a node that cannot work on the state class
                (e.g. a ``model_node`` without a ``messages`` field with ``add_messages``).
        """
        if self._compiled is not None:
            raise GraphConfigError(
                f"Graph '{self.name}' already has a flow; flow() is called once with every "
                f"edge. Build a new Graph for another flow.",
                [f"Graph '{self.name}' already has a flow; call flow() once"],
            )
        flow = compile_flow(self.name, _nested_edges(edges))
        check_node_states(self.name, flow, self._state)
        flow = compile_conditions(self.name, flow, self._state)
        nested = _subgraph_wiring(flow, self._services.schema)
        unknown = sorted((self._interrupt_before | self._interrupt_after) - set(flow.nodes))
        if unknown:
            raise GraphConfigError(f"Breakpoints name unknown nodes: {', '.join(unknown)}.")
        services = self._services
        compiled = CompiledGraph(
            name=services.name,
            schema=services.schema,
            positions=services.positions,
            new_id=services.new_id,
            clock=services.clock,
            lease_ttl=services.lease_ttl,
            flow=flow,
            max_steps=self._max_steps,
            timeout=self._timeout,
            interrupt_before=self._interrupt_before,
            interrupt_after=self._interrupt_after,
            redact=self._redact,
            sleep=self._sleep,
            cache_store=self._node_cache_store(flow),
            nested=nested,
            middleware=self._middleware,
            run_nodes=wrap_nodes(flow.nodes, self._middleware),
            agents=agent_graphs(self.name, self._agents),
        )
        self._compiled = compiled
        # From here on the thread methods that follow the flow (node_state, ...) read it.
        super()._declare_flow(compiled)
        return self

    def __nodestep_agent__(self) -> CompiledGraph:
        # What ``ctx.spawn`` runs for this graph as a sub-agent (``_engine.subagents``).
        return self._engine_graph()

    def _node_cache_store(self, flow: Flow) -> StateStore | None:
        if not any(n.cache is not None for n in flow.nodes.values()):
            return None
        return self._cache_store if self._cache_store is not None else InMemoryStateStore()

    def _engine_graph(self) -> CompiledGraph:
        if self._compiled is None:
            raise no_flow_yet(self.name)
        return self._compiled

    @property
    def _flow(self) -> Flow:
        return self._engine_graph().flow

    @property
    def nodes(self) -> dict[str, Node]:
        """The nodes of the flow, by name."""
        return self._flow.nodes

    @property
    def edges(self) -> dict[str, Any]:
        """What follows each node: a node name, a tuple of names, a ``Join``, ``END``, a
        ``When`` or a ``Branch``."""
        return self._flow.edges

    @property
    def declared(self) -> dict[str, frozenset[str]]:
        """The dynamic targets each node declared with ``@node(goto=[...])``."""
        return self._flow.declared

    @property
    def start(self) -> str:
        """The name of the node after ``START``."""
        return self._flow.start

    # -- running ----------------------------------------------------------------------------

    async def ainvoke(
        self, input: dict[str, Any] | S | Command | None = None, **options: Unpack[RunOptions]
    ) -> GraphResult[S]:
        """Run the graph until it completes or pauses.

        Args:
            input: A dict patch of state fields (or a state instance: the full state);
                ``None`` continues an unfinished superstep of the thread (with a store);
                ``Command(resume=...)`` answers a paused thread.
            **options: The run options: ``thread_id``, ``branch_id``, ``resume``,
                ``context``, ``state_store``, ``interrupt_before``, ``interrupt_after``
                (see ``RunOptions``).

        Returns:
            The ``GraphResult``.
        """
        graph = self._engine_graph()
        req = run_request(graph, self.state_store, "ainvoke", input, options, memory=self._memory)
        final = await execute(graph, req, _NO_EVENTS)
        return result_of(final, req.branch_id)

    def invoke(
        self, input: dict[str, Any] | S | Command | None = None, **options: Unpack[RunOptions]
    ) -> GraphResult[S]:
        """Run ``ainvoke`` from sync code; see ``ainvoke`` for the arguments.

        Without a running event loop, the run uses a private loop of the calling thread.
        Inside one (a Jupyter cell, say) it runs on a worker thread, and the call waits
        for it: the result is the same.
        """
        graph = self._engine_graph()
        req = run_request(graph, self.state_store, "invoke", input, options, memory=self._memory)
        key = _branch_key(req)
        if key is not None:
            close_paused(key)  # a stream of this thread left open: see track_paused

        async def run() -> GraphResult[S]:
            return result_of(await execute(graph, req, _NO_EVENTS), req.branch_id)

        return call_sync(run)

    def astream(
        self,
        input: dict[str, Any] | S | Command | None = None,
        *,
        stream_mode: str | Sequence[str],
        subgraphs: bool = False,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[StreamEvent, None]:
        """Run the graph and yield ``StreamEvent``s; the last is ``"final"`` or ``"interrupt"``.

        Args:
            input: See ``ainvoke``.
            stream_mode: Required: ``"updates"``, ``"values"``, ``"custom"``, ``"debug"``,
                ``"messages"``, ``"task_updates"`` or a list of them; ``[]`` yields only the
                terminal event.
            subgraphs: Also yield the events of subgraph runs, in the same modes; each
                names its place in ``StreamEvent.path``.
            **options: The run options, as for ``ainvoke``.

        The graph waits while your loop body handles an event. Closing the stream early
        (or cancelling the code that iterates it) stops the run; with a store, the
        unfinished superstep can be continued with ``invoke(None, thread_id=...)``.
        """
        graph = self._engine_graph()
        modes = stream_modes(stream_mode)
        req = run_request(
            graph, self.state_store, "astream", input, options, modes, memory=self._memory
        )
        req = with_subgraphs(req, subgraphs)
        return stream_run(graph, req)

    def stream(
        self,
        input: dict[str, Any] | S | Command | None = None,
        *,
        stream_mode: str | Sequence[str],
        subgraphs: bool = False,
        **options: Unpack[RunOptions],
    ) -> Iterator[StreamEvent]:
        """Run ``astream`` from sync code; see ``astream`` for the arguments.

        While your loop body handles an event, the graph waits. Inside a running event loop
        the run goes on a worker thread, as with ``invoke``.

        Leaving the loop (``break``) closes the stream, which stops the run and gives the
        thread back at once. A stream you still hold (``s = graph.stream(...)``) stays
        open until closed (``s.close()``), or until your next ``invoke``, ``stream``,
        ``update_state_sync`` or ``migrate_sync`` of the same thread and branch from this
        OS thread, which closes it first: only this thread could have asked it for more.
        """
        graph = self._engine_graph()
        modes = stream_modes(stream_mode)
        req = run_request(
            graph, self.state_store, "stream", input, options, modes, memory=self._memory
        )
        req = with_subgraphs(req, subgraphs)
        key = _branch_key(req)
        if key is None:
            return iterate_sync(stream_run(graph, req))
        close_paused(key)
        return track_paused(key, iterate_sync(stream_run(graph, req)))

    # -- describing -------------------------------------------------------------------------

    def to_mermaid(self) -> str:
        """Return a Mermaid flowchart of the graph."""
        return to_mermaid(self._flow)

    def to_svg(self, *, layout: SvgLayout = "auto") -> str:
        """Return the graph's drawing as SVG text, made offline.

        Boxes are the nodes (a double border for a graph used as a node, a dashed one for
        a deferred node, a note under a joined node naming what it waits for); plain
        edges are solid arrows, each source of a join a thick one, ``when``/``branch``
        routes arrows labelled with their condition or key, and the targets a node may
        choose at run time dashed grey arrows. Every name is escaped. The same graph gives
        the same SVG.

        Args:
            layout: ``"auto"`` (the default) lays the drawing out with Graphviz's ``dot``
                when it is on ``PATH``, and with nodestep's own layered layout (pure
                Python) otherwise; ``"graphviz"`` or ``"python"`` picks one.

        Raises:
            GraphConfigError: an unknown ``layout``, or ``"graphviz"`` where ``dot`` is
                missing or fails.
        """
        from nodestep._flow.diagram import flow_diagram  # on the first drawing, not at import

        return diagram_svg(flow_diagram(self._flow, self.name), layout)

    def to_spec(self) -> dict[str, Any]:
        """Return the graph as data: state class, nodes and edges, by import path."""
        return to_spec(
            self._flow,
            name=self.name,
            state=self.state,
            max_steps=self.max_steps,
            timeout=self.timeout,
        )

    def to_json(self) -> str:
        """Return ``to_spec()`` as indented JSON text."""
        return orjson.dumps(self.to_spec(), option=orjson.OPT_INDENT_2).decode()

    def to_yaml(self) -> str:
        """Return the graph as a YAML manifest that ``load_graph`` loads back.

        Raises:
            GraphConfigError: listing each part a manifest cannot express (a Python
                predicate, a ``branch()``, a list fan-out, a join, a function without an
                import path), or PyYAML is missing (``pip install 'nodestep[yaml]'``).
        """
        data = manifest_data(
            self._flow,
            name=self.name,
            state=self.state,
            max_steps=self.max_steps,
            timeout=self.timeout,
            middleware=self._middleware,
        )
        return manifest_text(data)

    def __repr__(self) -> str:
        return f"Graph({self.state.__name__}, name={self.name!r})"

    def _repr_html_(self) -> str:
        return self._repr_mimebundle_()["text/html"]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # A notebook shows the richest form it can: the HTML panel with the drawing, the
        # SVG alone, or JupyterLab's Mermaid renderer; all made offline, the drawing once.
        name, state = self.name, self.state.__name__
        if self._compiled is None:
            return {"text/plain": repr(self), "text/html": graph_html(name, state, None, 0)}
        svg = self.to_svg()
        return {
            "text/plain": repr(self),
            "text/html": graph_html(name, state, svg, len(self._flow.nodes)),
            "image/svg+xml": svg,
            "text/vnd.mermaid": self.to_mermaid(),
        }

    def __rshift__(self, target: Any) -> Edge:
        # ``child >> next_node``: the graph is a node of the flow it is used in (``flow()``
        # makes it one, see ``_nested_edges``).
        return Edge(self, target)

    def __rrshift__(self, source: Any) -> Edge:
        # ``[a, b] >> child``: a join (or a list) that leads to the graph as a node.
        return Edge(source, self)


def _branch_key(req: RunRequest) -> Hashable | None:
    """Return what names the branch a call writes, for ``close_paused``; ``None``: no store."""
    if req.store is None or req.thread_id is None:
        return None
    return stream_key(req.store, req.thread_id, req.branch_id)


def child_graph(graph: Graph[Any]) -> CompiledGraph:
    """Return the compiled graph that runs ``graph`` as a node of another graph.

    What a ``Graph`` hands over to be nested, in ``subgraph()`` or used directly in a
    flow: the engine runs the child's compiled graph, never the public ``Graph``.

    Raises:
        GraphConfigError: the graph has no flow yet, or has its own state store (a
            subgraph runs on its parent's store and thread).
    """
    compiled = graph._engine_graph()
    if graph.state_store is not None:
        raise GraphConfigError(
            f"Graph '{graph.name}' has its own state store, but a subgraph runs on the "
            f"parent's store and thread. Build it without state_store= to use it as a node."
        )
    return compiled


def _nested_edges(edges: Iterable[Any]) -> list[Any]:
    """Return ``edges`` with each ``Graph`` in an edge replaced by its subgraph node.

    Graphs in a list end, a join or a chain are replaced too. A graph used directly is
    the node ``subgraph(graph.name, graph)``: every field shared, no mapping functions;
    the same graph object gives the same node in every edge.
    """
    made: dict[int, SubgraphNode] = {}

    def as_node(x: Any) -> Any:
        if not isinstance(x, Graph):
            return x
        if id(x) not in made:
            made[id(x)] = SubgraphNode(x.name, child_graph(x), StateMap())
        return made[id(x)]

    def end(x: Any) -> Any:
        # A list end (``a >> [child, b]``, the join ``[child, b] >> c``) holds nodes too.
        return tuple(as_node(n) for n in x) if isinstance(x, tuple) else as_node(x)

    def swap(e: Any) -> Any:
        if isinstance(e, Edge):
            return Edge(end(e.source), end(e.target))
        if isinstance(e, Chain):  # ``a >> child >> b``: each edge of the chain
            return Chain(tuple(swap(link) for link in e.edges))
        return as_node(e)

    return [swap(e) for e in edges]


def _subgraph_wiring(flow: Flow, schema: StateSchema) -> bool:
    """Check the flow's subgraph nodes against the parent's state; tell whether it has any.

    Raises:
        GraphConfigError: a subgraph's state mapping cannot work, listing every problem.
    """
    nodes = [n for n in flow.nodes.values() if isinstance(n, SubgraphNode)]
    problems = [p for n in nodes for p in n.state_map.problems(n.name, schema, n.child.schema)]
    if problems:
        raise GraphConfigError("\n".join(problems) + ".", problems)
    return bool(nodes)
