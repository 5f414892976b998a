"""Reading what a run keeps apart from the state: nodes' private state, subgraph runs.

``Graph`` inherits these methods. Neither is part of ``get_state().value``: a node's
private state is only its own (see ``docs/node_state.md``), and a subgraph run's state
lives in its parent's history until its task finishes (see ``docs/subgraphs.md``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.history import StateSnapshot
from nodestep._engine.private_state import node_state
from nodestep._engine.subgraph_state import subgraph_state
from nodestep._flow.nodes import Node
from nodestep._graph.sync_form import sync_form
from nodestep.store import StateStore

__all__ = ["InsideMethods"]


class InsideMethods:
    """``node_state`` and ``subgraph_state`` of a graph; ``Graph`` inherits them."""

    def _store(self, state_store: StateStore | None) -> StateStore:
        raise NotImplementedError  # ThreadMethods's, which Graph inherits too

    def _engine_graph(self) -> CompiledGraph:
        raise NotImplementedError  # Graph's own

    async def node_state(
        self,
        thread_id: str,
        node: Node | str,
        at: str | None = None,
        *,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> BaseModel:
        """Return a node's private state on a thread, at the latest event or at event ``at``.

        The private state is not part of ``get_state().value``; this is how to read it,
        and ``at=`` reads it at any event, as ``load(at=...)`` reads the state.

        Args:
            thread_id: The thread.
            node: The node (or its name) that declares ``private_state``.
            at: An event id, as for ``load``; ``None``: the latest.
            branch_id: The branch, as for ``load``.
            state_store: A store for this call; it wins over the graph's.

        Returns:
            An instance of the node's private state model (its defaults if the node never
            changed it on the thread).

        Raises:
            GraphConfigError: no store, or the node is unknown or has no private state.
            UnknownThreadError: the thread, branch or event does not exist.
        """
        name = node.name if isinstance(node, Node) else node
        store = self._store(state_store)
        graph = self._engine_graph()
        return await node_state(graph, store, thread_id, name, branch_id, at)

    async def subgraph_state(
        self,
        thread_id: str,
        path: str,
        at: str | None = None,
        *,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> StateSnapshot[Any]:
        """Return the ``StateSnapshot`` of an unfinished subgraph run, by its task path.

        ``path`` is the task path, as in an interrupt key or ``StreamEvent.path``, e.g.
        ``"review/legal"``. The snapshot holds the child's state, status, pending tasks and
        interrupts (keyed as the child names them), at the latest event or at ``at``.

        Raises:
            GraphConfigError: a step of ``path`` is not a subgraph node.
            UnknownThreadError: the thread or event does not exist, or no unfinished
                subgraph run is kept at ``path`` (its task has not started it, or finished).
        """
        store = self._store(state_store)
        graph = self._engine_graph()
        return await subgraph_state(graph, store, thread_id, path, branch_id, at)

    # -- the sync forms -------------------------------------------------------------------

    node_state_sync = sync_form(node_state)
    subgraph_state_sync = sync_form(subgraph_state)
