"""A drawing as data: boxes, arrows and their styles, before any layout.

``_flow.diagram`` builds one from a flow; the SVG writers (``_display.svg`` by itself,
``_display.graphviz`` with Graphviz's ``dot``) lay it out. Keeping the description apart
from the layout is what lets both writers draw the same picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Arrow", "ArrowStyle", "Box", "BoxKind", "Diagram", "visible"]

BoxKind = Literal["terminal", "node", "deferred", "subgraph"]
"""``terminal`` for START/END, ``deferred`` for a node that waits for the rest of the turn,
``subgraph`` for a graph used as a node."""

ArrowStyle = Literal["edge", "join", "route", "goto"]
"""``edge`` a plain edge, ``join`` one source of a join, ``route`` a conditional edge
(labelled with its condition or key), ``goto`` a target a node may choose at run time."""


@dataclass(frozen=True, slots=True)
class Box:
    """One box of the drawing.

    Attributes:
        id: The box's id, unique in the diagram (an ASCII name the writers can use as is).
        label: The text drawn in the box: the node's name.
        kind: How the box is drawn.
        note: A second, smaller line (what a join waits for, a subgraph's size), or ``""``.
    """

    id: str
    label: str
    kind: BoxKind = "node"
    note: str = ""


@dataclass(frozen=True, slots=True)
class Arrow:
    """One arrow between two boxes, by their ids."""

    source: str
    target: str
    style: ArrowStyle = "edge"
    label: str = ""


@dataclass(frozen=True, slots=True)
class Diagram:
    """A graph's drawing before layout: boxes in the order they were declared, and arrows.

    The order is part of the description: both layouts break ties by it, which is what
    makes the same graph give the same SVG.
    """

    title: str
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]


def visible(text: str) -> str:
    """Return ``text`` with each unprintable character written as its escape (``\\n``).

    Why: a name may hold a line break or a control character; drawn raw, the first
    would vanish into a space and the second makes the SVG invalid XML. Written as
    ``\\n`` or ``\\x01``, the drawing shows the name as Python would print it.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
