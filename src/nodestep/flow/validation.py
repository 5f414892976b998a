"""Check a whole flow at once and compile it into routing tables.

Every check runs and every problem is reported together, each with its fix, so a flow
with three mistakes takes one round of fixes, not three.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nodestep.errors import GraphConfigError
from nodestep.flow.edges import END, START, Edge, Terminal, label, not_a_node
from nodestep.flow.nodes import Node
from nodestep.flow.routing import Branch, When

__all__ = ["Flow", "compile_flow"]


@dataclass(frozen=True, slots=True)
class Flow:
    """A validated flow as routing tables.

    Attributes:
        nodes: Every node, by name.
        start: The node after ``START``.
        edges: What follows each node: a node name, ``END``, a ``When`` or a ``Branch``.
            A node that only routes with ``Command``/``Send`` has no entry.
        declared: The names each node may route to dynamically (``"END"`` for ``END``).
        order: The edges as given, for drawing and specs.
    """

    nodes: dict[str, Node]
    start: str
    edges: dict[str, Any]
    declared: dict[str, frozenset[str]]
    order: tuple[Edge, ...]


def compile_flow(graph_name: str, items: Iterable[Any]) -> Flow:
    """Validate ``items`` (edges) and return the flow's routing tables.

    Raises:
        GraphConfigError: listing every problem found, each with its fix.
    """
    problems: list[str] = []
    edges = _edges(items, problems)
    nodes = _collect_nodes(edges, problems)
    start = _start(edges, problems)
    table = _routing_table(edges, problems)
    declared = {n.name: _declared(n, nodes, problems) for n in nodes.values()}
    problems.extend(
        f"Node '{name}' has no outgoing edge, branch or goto; end it with '{name} >> END'"
        for name in nodes
        if name not in table and not declared[name]
    )
    if start:
        reachable = _reachable(start, table, declared)
        problems.extend(
            f"Node '{name}' is not reachable from START; route to it from a reachable node "
            f"(an edge, when/branch or a declared goto) or leave it out of the flow"
            for name in nodes
            if name not in reachable
        )
    if problems:
        listing = "\n".join(f"- {p}" for p in problems)
        raise GraphConfigError(f"Graph '{graph_name}' has an invalid flow:\n{listing}", problems)
    return Flow(nodes, start, table, declared, tuple(edges))


def _edges(items: Iterable[Any], problems: list[str]) -> list[Edge]:
    edges: list[Edge] = []
    for item in items:
        if isinstance(item, Edge):
            edges.append(item)
        elif callable(item) and not isinstance(item, Node | type):
            problems.append(not_a_node(item, "flow()"))
        else:
            problems.append(
                f"flow() takes edges like 'a >> b', got {item!r}; write START >> first, "
                f"a >> b, a >> when(...), a >> branch(...) or last >> END"
            )
    return edges


def _collect_nodes(edges: list[Edge], problems: list[str]) -> dict[str, Node]:
    """Return every node the edges name, and the nodes they declare as goto targets."""
    nodes: dict[str, Node] = {}
    seen_twice: set[str] = set()

    def collect(n: Node) -> None:
        other = nodes.get(n.name)
        if other is None:
            nodes[n.name] = n
        elif other is not n and n.name not in seen_twice:
            seen_twice.add(n.name)
            problems.append(
                f"Two different nodes are named '{n.name}'; give one of them another name "
                f"with @node(name=...)"
            )

    for edge in edges:
        for end in (edge.source, *_targets(edge.target)):
            if isinstance(end, Node):
                collect(end)
    todo = list(nodes.values())  # goto targets, and theirs in turn
    while todo:
        for g in todo.pop().goto:
            if isinstance(g, Node) and g.name not in nodes:
                collect(g)
                todo.append(g)
            elif isinstance(g, Node):
                collect(g)
    return nodes


def _start(edges: list[Edge], problems: list[str]) -> str:
    """Return the node after ``START``, or ``""`` when that is a problem."""
    starts = [e for e in edges if e.source is START]
    if not starts:
        problems.append("The flow has no START edge; add START >> first_node")
    elif len(starts) > 1:
        shown = ", ".join(label(e.target) for e in starts)
        problems.append(f"The flow has {len(starts)} START edges (to {shown}); keep exactly one")
    elif isinstance(starts[0].target, Node):
        return starts[0].target.name
    elif callable(starts[0].target) and not isinstance(starts[0].target, Terminal):
        problems.append(not_a_node(starts[0].target, "The START edge"))
    else:
        problems.append(
            f"START must lead to a node, not {label(starts[0].target)}; write START >> first_node"
        )
    return ""


def _routing_table(edges: list[Edge], problems: list[str]) -> dict[str, Any]:
    """Return what follows each node: a node name, ``END``, a ``When`` or a ``Branch``."""
    table: dict[str, Any] = {}
    for edge in edges:
        source, target = edge.source, edge.target
        if source is START:
            continue
        if source is END:
            problems.append("END cannot have an outgoing edge; remove the edge from END")
        elif not isinstance(source, Node):
            problems.append(f"An edge starts at {source!r}, which is not a node")
        elif not (isinstance(target, Node | When | Branch) or target is END):
            if callable(target) and not isinstance(target, Terminal):
                problems.append(not_a_node(target, f"The edge from '{source.name}'"))
            else:
                problems.append(
                    f"The edge from '{source.name}' goes to {target!r}; an edge goes to a node, "
                    f"END, when(...) or branch(...)"
                )
        elif source.name in table:
            problems.append(
                f"Node '{source.name}' has two edges; a node has one edge, when(...) or "
                f"branch(...). Use branch(...) to choose between targets"
            )
        else:
            table[source.name] = target.name if isinstance(target, Node) else target
    return table


def _declared(n: Node, nodes: dict[str, Node], problems: list[str]) -> frozenset[str]:
    """Return the names ``n`` may route to with ``Command``/``Send`` (``"END"`` for END)."""
    names: set[str] = set()
    for g in n.goto:  # @node refused anything but nodes, names and END
        if g is END:
            names.add("END")
        elif isinstance(g, Node):
            names.add(g.name)
        else:
            if g not in nodes:
                problems.append(
                    f"Node '{n.name}' declares goto '{g}', which matches no node of the flow; "
                    f"fix the name or add the node to the flow"
                )
            names.add(g)
    return frozenset(names)


def _targets(target: Any) -> list[Any]:
    if isinstance(target, When | Branch):
        return target.targets()
    return [target]


def _reachable(start: str, table: dict[str, Any], declared: dict[str, frozenset[str]]) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        name = todo.pop()
        nxt: list[str] = [g for g in declared.get(name, ()) if g != "END"]
        route = table.get(name)
        if isinstance(route, str):
            nxt.append(route)
        elif isinstance(route, When | Branch):
            nxt.extend(t.name for t in route.targets() if isinstance(t, Node))
        for n in nxt:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen
