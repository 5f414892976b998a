"""Check a whole flow at once and compile it into routing tables.

Every check runs and every problem is reported together, each with its fix, so a flow
with three mistakes takes one round of fixes, not three.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nodestep._errors import GraphConfigError
from nodestep._flow.edges import END, START, Chain, Edge, Terminal, label, not_a_node
from nodestep._flow.nodes import Node
from nodestep._flow.routing import Branch, When

__all__ = ["Flow", "Join", "check_node_states", "compile_flow"]


@dataclass(frozen=True, slots=True)
class Flow:
    """A validated flow as routing tables.

    Attributes:
        nodes: Every node, by name.
        start: The node after ``START``.
        edges: What follows each node: a node name, a tuple of names (``a >> [b, c]``),
            a ``Join`` (the node is a source of ``[b, c] >> d``), ``END``, a ``When`` or a
            ``Branch``. A node that only routes with ``Command``/``Send`` has no entry.
        declared: The names each node may route to dynamically (``"END"`` for ``END``).
        order: The edges as given, for drawing and specs.
        joins: The sources each joined node waits on, by the joined node's name.
    """

    nodes: dict[str, Node]
    start: str
    edges: dict[str, Any]
    declared: dict[str, frozenset[str]]
    order: tuple[Edge, ...]
    joins: dict[str, tuple[str, ...]] = field(default_factory=dict)


def compile_flow(graph_name: str, items: Iterable[Any]) -> Flow:
    """Validate ``items`` (edges) and return the flow's routing tables.

    Raises:
        GraphConfigError: listing every problem found, each with its fix.
    """
    problems: list[str] = []
    edges = _edges(items, problems)
    nodes, named_twice = _collect_nodes(edges, problems)
    start = _start(edges, problems)
    joins: dict[str, tuple[str, ...]] = {}
    table = _routing_table(edges, problems, joins, named_twice)
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
        for target, sources in joins.items():
            _check_join(start, target, sources, table, declared, reachable, problems)
    if problems:
        listing = "\n".join(f"- {p}" for p in problems)
        raise GraphConfigError(f"Graph '{graph_name}' has an invalid flow:\n{listing}", problems)
    return Flow(nodes, start, table, declared, tuple(edges), joins)


def check_node_states(graph_name: str, flow: Flow, state: type[Any]) -> None:
    """Refuse a state class that a node of ``flow`` cannot work on (``Node.state_check``).

    Raises:
        GraphConfigError: listing what each node needs of ``state``, with the fix.
    """
    problems = []
    for n in flow.nodes.values():
        found = n.state_check(state) if n.state_check is not None else None
        if found:
            problems.append(found)
    if problems:
        listing = "\n".join(f"- {p}" for p in problems)
        raise GraphConfigError(
            f"Graph '{graph_name}' has nodes its state {state.__name__} does not fit:\n{listing}",
            problems,
        )


def _edges(items: Iterable[Any], problems: list[str]) -> list[Edge]:
    edges: list[Edge] = []
    for item in items:
        if isinstance(item, Edge):
            edges.append(item)
        elif isinstance(item, Chain):
            edges.extend(item.edges)
        elif callable(item) and not isinstance(item, Node | type):
            problems.append(not_a_node(item, "flow()"))
        else:
            problems.append(
                f"flow() takes edges like 'a >> b', got {item!r}; write START >> first, "
                f"a >> b, a >> when(...), a >> branch(...) or last >> END"
            )
    return edges


def _collect_nodes(edges: list[Edge], problems: list[str]) -> tuple[dict[str, Node], set[str]]:
    """Return the flow's nodes by name, and the names two different nodes share.

    The nodes are those the edges name and the goto targets they declare, in turn; of two
    nodes with one name the first is kept (the collision is a problem of its own).
    """
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
        sources = edge.source if isinstance(edge.source, tuple) else (edge.source,)
        for end in (*sources, *_targets(edge.target)):
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
    return nodes, seen_twice


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
    elif isinstance(starts[0].target, tuple):
        problems.append(
            "START leads to one node, not a list; start at one node and fan out from it: "
            "START >> first, first >> [a, b]"
        )
    elif callable(starts[0].target) and not isinstance(starts[0].target, Terminal):
        problems.append(not_a_node(starts[0].target, "The START edge"))
    else:
        problems.append(
            f"START must lead to a node, not {label(starts[0].target)}; write START >> first_node"
        )
    return ""


def _routing_table(
    edges: list[Edge],
    problems: list[str],
    joins: dict[str, tuple[str, ...]],
    named_twice: set[str],
) -> dict[str, Any]:
    """Return what follows each node (see ``Flow.edges``); fill ``joins`` from the joins.

    Why ``named_twice`` is passed: the edges of two nodes with one name fall on one row, so
    a "two edges" problem there would follow from the collision already reported, not from
    either node; the table keeps the first edge and the flow is refused anyway.
    """
    table: dict[str, Any] = {}

    def add(name: str, route: Any) -> None:
        if name not in named_twice or name not in table:
            _add_route(table, name, route, problems)

    for edge in edges:
        source, target = edge.source, edge.target
        if source is START:
            continue
        if isinstance(source, tuple):
            for name, route in _join_routes(source, target, problems, joins):
                add(name, route)
        elif source is END:
            problems.append("END cannot have an outgoing edge; remove the edge from END")
        elif not isinstance(source, Node):
            problems.append(f"An edge starts at {source!r}, which is not a node")
        elif isinstance(target, tuple):
            fan = _node_names(target, f"The list after '{source.name}'", problems)
            if fan:
                add(source.name, fan[0] if len(fan) == 1 else fan)
        elif not (isinstance(target, Node | When | Branch) or target is END):
            if callable(target) and not isinstance(target, Terminal):
                problems.append(not_a_node(target, f"The edge from '{source.name}'"))
            else:
                problems.append(
                    f"The edge from '{source.name}' goes to {target!r}; an edge goes to a node, "
                    f"END, a list of nodes, when(...) or branch(...)"
                )
        else:
            add(source.name, target.name if isinstance(target, Node) else target)
    return table


def _add_route(table: dict[str, Any], name: str, route: Any, problems: list[str]) -> None:
    join = next((r for r in (table.get(name), route) if isinstance(r, Join)), None)
    if name in table and join is not None:
        # The join is the source's one edge; a route of its own (an error route, say)
        # would let the source leave the turn without arriving at the barrier.
        problems.append(
            f"Node '{name}' is a source of the join [{', '.join(join.sources)}] >> "
            f"{join.target} and has another edge; a join source's edge is the join. To "
            f"route on its failure, make '{name}' and its error route a subgraph and use "
            f"the subgraph as the join's source"
        )
    elif name in table:
        problems.append(
            f"Node '{name}' has two edges; a node has one edge, when(...) or "
            f"branch(...). Use branch(...) to choose between targets, or {name} >> [x, y] "
            f"to run several"
        )
    else:
        table[name] = route


def _node_names(items: tuple[Any, ...], where: str, problems: list[str]) -> tuple[str, ...]:
    """Return the names of a list of nodes (each once), or ``()`` when that is a problem."""
    if not items:
        problems.append(f"{where} is empty; list at least one node")
        return ()
    for item in items:
        if not isinstance(item, Node):
            if callable(item) and not isinstance(item, Terminal | type):
                problems.append(not_a_node(item, where))
            else:
                problems.append(f"{where} holds {label(item)}; a list of an edge holds nodes only")
            return ()
    return tuple(dict.fromkeys(n.name for n in items))


def _join_routes(
    source: tuple[Any, ...], target: Any, problems: list[str], joins: dict[str, tuple[str, ...]]
) -> list[tuple[str, Any]]:
    """Return the route each source of ``[b, c] >> target`` gets; record the join."""
    shown = "[" + ", ".join(label(s) for s in source) + "]"
    names = _node_names(source, f"The join {shown}", problems)
    if not names:
        return []
    if target is END:  # every source ends its path
        return [(n, END) for n in names]
    if not isinstance(target, Node):
        problems.append(
            f"The join {shown} leads to {label(target)}; a join leads to one node (or END): "
            f"{shown} >> node, then route on from that node"
        )
        return []
    if len(names) == 1:
        return [(names[0], target.name)]
    if target.name in joins:
        # The suggested join must itself be valid: each source once, never the target.
        waits = [n for n in dict.fromkeys((*joins[target.name], *names)) if n != target.name]
        problems.append(
            f"Node '{target.name}' is the target of two joins; list every node it waits on "
            f"in one join: [{', '.join(waits)}] >> {target.name}"
        )
        return []
    joins[target.name] = names
    return [(n, Join(target.name, names)) for n in names]


@dataclass(frozen=True, slots=True)
class Join:
    """The edge of each source of a join ``[b, c] >> d``, as ``Graph.edges`` shows it.

    ``d`` runs once after every source has run in the turn; then the barrier starts over
    (see ``docs/joins.md``).

    Attributes:
        target: The joined node's name (``"d"``).
        sources: The names of the nodes it waits on, in the order the join lists them.
    """

    target: str
    sources: tuple[str, ...]


def _check_join(
    start: str,
    target: str,
    sources: tuple[str, ...],
    table: dict[str, Any],
    declared: dict[str, frozenset[str]],
    reachable: set[str],
    problems: list[str],
) -> None:
    """Report a join that can never fill: its sources cannot all run in one turn.

    Why a sketch of the runs is enough: a join fills only if one turn runs every source
    before the join fires, so each source must be reachable without the join itself, and
    each two sources must run together: one leads to the other, or a fork (a list edge,
    or a node's declared gotos, which may run several targets) leads to both. A
    ``when``/``branch`` picks one target, so it is not a fork.
    """
    shown = f"[{', '.join(sources)}] >> {target}"
    if target in sources:
        problems.append(
            f"The join {shown} waits on '{target}' itself, so '{target}' would wait for its "
            f"own run and never run; leave '{target}' out of the list"
        )
        return
    cut = {n: r for n, r in table.items() if not (isinstance(r, Join) and r.target == target)}
    before = _reachable(start, cut, declared)
    for s in sources:
        if s in reachable and s not in before:
            problems.append(
                f"The join {shown} waits on '{s}', which runs only after '{target}' (every "
                f"path from START to '{s}' goes through the join), so '{target}' would never "
                f"run; route to '{s}' from a node that runs before the join"
            )
            return
    reach: dict[str, set[str]] = {}

    def after(name: str) -> set[str]:  # the node and every node reachable from it
        if name not in reach:
            reach[name] = _reachable(name, cut, declared)
        return reach[name]

    forks = [(r, False) for n, r in cut.items() if n in before and isinstance(r, tuple)]
    forks += [(tuple(g - {"END"}), True) for n, g in declared.items() if n in before and g]
    for i, x in enumerate(sources):
        for y in sources[i + 1 :]:
            if not _together(x, y, after, forks):
                problems.append(
                    f"The join {shown} can never fill: no run reaches both '{x}' and '{y}' in "
                    f"one turn (a when(...) or branch(...) picks one of them, and no edge "
                    f"leads from one to the other). Fan out to both, e.g. a >> [{x}, {y}] or "
                    f"Command(goto=[...]), or join only nodes that run in the same turn"
                )
                return


def _together(x: str, y: str, after: Any, forks: list[tuple[tuple[str, ...], bool]]) -> bool:
    """Tell whether one run may reach both ``x`` and ``y`` (see ``_check_join``).

    A fork's flag says whether it may run one target twice (``Send`` may).
    """
    if y in after(x) or x in after(y):
        return True
    for slots, twice in forks:
        for i, first in enumerate(slots):
            if x not in after(first):
                continue
            if any((i != j or twice) and y in after(second) for j, second in enumerate(slots)):
                return True
    return False


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
    if isinstance(target, tuple):
        return list(target)
    return [target]


def _reachable(start: str, table: dict[str, Any], declared: dict[str, frozenset[str]]) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        name = todo.pop()
        for n in _successors(name, table, declared):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def _successors(name: str, table: dict[str, Any], declared: dict[str, frozenset[str]]) -> list[str]:
    """Return the nodes that may run right after ``name``."""
    nxt = [g for g in declared.get(name, ()) if g != "END"]
    route = table.get(name)
    if isinstance(route, str):
        nxt.append(route)
    elif isinstance(route, tuple):
        nxt.extend(route)
    elif isinstance(route, Join):
        nxt.append(route.target)
    elif isinstance(route, When | Branch):
        nxt.extend(t.name for t in route.targets() if isinstance(t, Node))
    return nxt
