"""Describe a flow as a ``Diagram``: the boxes and arrows its SVG drawings are made of."""

from __future__ import annotations

from typing import Any

from nodestep._display.diagram import Arrow, Box, BoxKind, Diagram
from nodestep._flow.drawing import predicate_label
from nodestep._flow.edges import END
from nodestep._flow.nodes import Node
from nodestep._flow.routing import Branch, When
from nodestep._flow.validation import Flow, Join

__all__ = ["flow_diagram"]


def _box(name: str, node: Node, box_id: str, flow: Flow) -> Box:
    notes = []
    child = getattr(getattr(node, "child", None), "flow", None)  # a graph used as a node
    if isinstance(child, Flow):
        notes.append(f"subgraph · {len(child.nodes)} node{'s' if len(child.nodes) != 1 else ''}")
    if name in flow.joins:
        notes.append("waits for " + ", ".join(flow.joins[name]))
    if node.defer:
        notes.append("deferred")
    kind: BoxKind = "subgraph" if isinstance(child, Flow) else "deferred" if node.defer else "node"
    return Box(box_id, name, kind, " · ".join(notes))


def flow_diagram(flow: Flow, title: str) -> Diagram:
    """Return the boxes and arrows of ``flow``, in the order it was declared.

    Plain edges and fan-outs are ``edge`` arrows, each source of a join a ``join`` arrow
    (the joined box notes what it waits for), ``when``/``branch`` routes ``route`` arrows
    labelled with the condition or key (``otherwise`` for a chain's fallback), and the
    targets a node declares for ``Command``/``Send`` ``goto`` arrows.
    """
    ids = {"START": "START", "END": "END"}
    ids |= {name: f"n{i}" for i, name in enumerate(flow.nodes)}
    boxes = [Box("START", "START", "terminal")]
    boxes += [_box(name, node, ids[name], flow) for name, node in flow.nodes.items()]
    boxes.append(Box("END", "END", "terminal"))
    arrows = [Arrow("START", ids[flow.start])]
    for name in flow.nodes:
        arrows += [
            Arrow(ids[name], ids[t], style, label) for t, style, label in _routes(flow, name)
        ]
    return Diagram(title, tuple(boxes), tuple(arrows))


def _routes(flow: Flow, name: str) -> list[tuple[str, Any, str]]:
    """The targets after ``name``: (target name, arrow style, label)."""
    route = flow.edges.get(name)
    out: list[tuple[str, Any, str]] = []
    if isinstance(route, str):
        out.append((route, "edge", ""))
    elif isinstance(route, tuple):
        out += [(target, "edge", "") for target in route]
    elif isinstance(route, Join):
        out.append((route.target, "join", ""))
    elif route is END:
        out.append(("END", "edge", ""))
    elif isinstance(route, When):
        for link in route.links():
            out.append((link.target.name, "route", predicate_label(link.predicate)))
        out.append((route.fallback().name, "route", "otherwise"))
    elif isinstance(route, Branch):
        out += [(mapped.name, "route", str(key)) for key, mapped in route.mapping.items()]
    out += [(declared, "goto", "") for declared in sorted(flow.declared[name])]
    return out
