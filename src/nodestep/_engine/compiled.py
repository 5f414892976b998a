"""What the engine runs and reads: a graph's settings, fixed when the graph is built."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from nodestep._engine.positions import PositionCache
from nodestep._engine.redact import Redact
from nodestep._flow.middleware import Middleware
from nodestep._flow.nodes import Node
from nodestep._flow.validation import Flow
from nodestep._ids import Clock, IdFactory
from nodestep._state.schema import StateSchema
from nodestep.store import StateStore

__all__ = ["CompiledGraph", "Sleep", "ThreadServices"]

Sleep = Callable[[float], Awaitable[None]]
"""Waits the given seconds, as ``anyio.sleep`` does (the default); tests pass a fake."""


@dataclass(frozen=True, slots=True)
class ThreadServices:
    """What reading and changing a graph's threads needs; a graph has it before its flow.

    Attributes:
        name: The graph's name, for errors and ``NodeContext.graph_name``.
        schema: The compiled state class.
        positions: The latest positions of the threads the graph used.
        new_id: Makes the ids of events, runs, generated threads and branches.
        clock: Stamps history records (seconds since the epoch).
        lease_ttl: Seconds a writer's hold on a thread lasts unless renewed (see
            ``_engine.lease``).
    """

    name: str
    schema: StateSchema
    positions: PositionCache
    new_id: IdFactory
    clock: Clock
    lease_ttl: float

    def hex_id(self) -> str:
        """Return a new id without dashes, for runs, generated threads and branches."""
        return self.new_id().replace("-", "")


@dataclass(frozen=True, slots=True)
class CompiledGraph(ThreadServices):
    """A graph as the engine runs it: its services, flow and limits.

    ``Graph.flow()`` builds one and every run of the graph uses it, so nothing a run reads
    can change under it. The engine never sees the public ``Graph``.

    Attributes:
        flow: The validated routing tables.
        max_steps: The superstep limit of one call.
        timeout: Seconds one call may spend inside supersteps, or ``None``.
        interrupt_before: Nodes to pause before, unless a call names its own.
        interrupt_after: Nodes to pause after, unless a call names its own.
        redact: Rewrites a failure's message before it is stored, or ``None``.
        run_tables: What runs derive from the flow alone, made by the first run and kept
            for the rest (see ``_engine.routing.Router``).
        sleep: Waits the given seconds between the attempts of a retried task.
        cache_store: Where the results of nodes with ``@node(cache=...)`` are kept, or
            ``None`` when no node has a cache policy.
        nested: Whether the flow has subgraph nodes (``_engine.subgraph``).
        middleware: The graph's ``Middleware``, in order; ``()`` for none.
        run_nodes: The nodes tasks run, by name: the flow's own, or with the middleware's
            node hooks around them (``_engine.middleware_nodes``); ``None``: the flow's.
        agents: The sub-agents its nodes may spawn by name (``_engine.subagents``).
    """

    flow: Flow
    max_steps: int
    timeout: float | None
    interrupt_before: frozenset[str]
    interrupt_after: frozenset[str]
    redact: Redact | None = None
    sleep: Sleep = anyio.sleep
    cache_store: StateStore | None = None
    nested: bool = False
    middleware: tuple[Middleware, ...] = ()
    run_nodes: dict[str, Node] | None = None
    agents: Mapping[str, CompiledGraph] = field(default_factory=dict, compare=False, repr=False)
    run_tables: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def nodes(self) -> dict[str, Node]:
        """The flow's nodes, by name."""
        return self.flow.nodes
