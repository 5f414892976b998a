"""Write a laid-out diagram as SVG, with no program but Python.

The SVG is self-contained (no script, no font or stylesheet fetched), every text
escaped, and every number written with one decimal, so the same layout gives the same
bytes.
"""

from __future__ import annotations

import itertools
from html import escape

from nodestep._display.diagram import Diagram, visible
from nodestep._display.layout import (
    FONT_SIZE,
    NOTE_SIZE,
    Placed,
    Route,
    layered_layout,
    text_width,
)

__all__ = ["FONT_FAMILY", "python_svg"]

FONT_FAMILY = "Helvetica, Arial, sans-serif"
_INK = "#2d3b4e"
_FAINT = "#8a94a3"
_FILL = {"node": "#eef3fb", "deferred": "#f6f6f6", "subgraph": "#f1f8ee", "terminal": "#e6e6e6"}


def _marker(name: str, colour: str) -> str:
    return (
        f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" '
        f'markerWidth="9" markerHeight="9" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
    )


# the markers scale with the drawing, not with the line: a join's thick line keeps a
# normal arrowhead
_DEFS = f"<defs>{_marker('nodestep-arrow', _INK)}{_marker('nodestep-arrow-faint', _FAINT)}</defs>"


def python_svg(diagram: Diagram) -> str:
    """Return ``diagram`` as SVG, laid out by ``_display.layout`` (no Graphviz needed)."""
    layout = layered_layout(diagram)
    w, h = _n(layout.width), _n(layout.height)
    title = escape(visible(diagram.title))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family="{FONT_FAMILY}" font-size="{FONT_SIZE}" '
        f'role="img" aria-label="{title}">',
        f"<title>{title}</title>",
        _DEFS,
        f'<rect width="{w}" height="{h}" fill="#ffffff"/>',
    ]
    parts += [_arrow(route) for route in layout.routes]
    parts += [_box(placed) for placed in layout.boxes.values()]
    parts += [_arrow_label(route) for route in layout.routes if route.arrow.label]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _n(value: float) -> str:
    return f"{value:.1f}"


def _box(p: Placed) -> str:
    left, top = p.x - p.width / 2, p.y - p.height / 2
    kind = p.box.kind
    radius = p.height / 2 if kind == "terminal" else 6.0
    dash = ' stroke-dasharray="5 3"' if kind == "deferred" else ""
    shape = (
        f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(p.width)}" height="{_n(p.height)}" '
        f'rx="{_n(radius)}" fill="{_FILL[kind]}" stroke="{_INK}" stroke-width="1.2"{dash}/>'
    )
    if kind == "subgraph":  # a double border: a graph inside
        shape += (
            f'<rect x="{_n(left + 4)}" y="{_n(top + 4)}" width="{_n(p.width - 8)}" '
            f'height="{_n(p.height - 8)}" rx="4.0" fill="none" stroke="{_INK}" '
            'stroke-width="0.8"/>'
        )
    label_y = p.y - 6 if p.box.note else p.y
    text = (
        f'<text x="{_n(p.x)}" y="{_n(label_y)}" text-anchor="middle" '
        f'dominant-baseline="central" fill="{_INK}">{escape(visible(p.box.label))}</text>'
    )
    if p.box.note:
        text += (
            f'<text x="{_n(p.x)}" y="{_n(p.y + 10)}" text-anchor="middle" '
            f'dominant-baseline="central" font-size="{NOTE_SIZE}" fill="#5b6675">'
            f"{escape(visible(p.box.note))}</text>"
        )
    return f'<g class="node" data-name="{escape(visible(p.box.label))}">{shape}{text}</g>'


def _path(route: Route) -> str:
    pts = route.points
    if len(pts) == 2 and pts[1][1] < pts[0][1]:  # one row back up: a gentle bow
        (x0, y0), (x1, y1) = pts
        bow = max(x0, x1) + 18
        return (
            f"M{_n(x0)},{_n(y0)} C{_n(bow)},{_n(y0 - 12)} {_n(bow)},{_n(y1 + 12)} {_n(x1)},{_n(y1)}"
        )
    if route.loop:  # a smooth curve through the two bends on the right
        (x0, y0), (bx, _), (_, _), (x1, y1) = pts
        return f"M{_n(x0)},{_n(y0)} C{_n(bx)},{_n(y0)} {_n(bx)},{_n(y1)} {_n(x1)},{_n(y1)}"
    d = [f"M{_n(pts[0][0])},{_n(pts[0][1])}"]
    for (ax, ay), (bx, by) in itertools.pairwise(pts):
        mid = (ay + by) / 2  # vertical tangents at both ends: arrows leave and enter straight
        d.append(f"C{_n(ax)},{_n(mid)} {_n(bx)},{_n(mid)} {_n(bx)},{_n(by)}")
    return " ".join(d)


def _arrow(route: Route) -> str:
    style = route.arrow.style
    colour, marker = (
        (_FAINT, "nodestep-arrow-faint") if style == "goto" else (_INK, "nodestep-arrow")
    )
    width = "2.6" if style == "join" else "1.2"
    dash = ' stroke-dasharray="6 4"' if style == "goto" else ""
    return (
        f'<path class="edge {style}" d="{_path(route)}" fill="none" stroke="{colour}" '
        f'stroke-width="{width}"{dash} marker-end="url(#{marker})"/>'
    )


def _arrow_label(route: Route) -> str:
    pts = route.points
    if route.loop:
        x, y = pts[1][0] - 0.25 * (pts[1][0] - pts[0][0]), (pts[1][1] + pts[2][1]) / 2
    else:
        # past the middle of the last stretch, where arrows that leave one box together
        # have drawn apart
        (ax, ay), (bx, by) = pts[-2], pts[-1]
        x, y = ax + 0.6 * (bx - ax), ay + 0.6 * (by - ay)
    text = visible(route.arrow.label)
    w = text_width(text, NOTE_SIZE) + 8
    return (
        f'<g class="edge-label"><rect x="{_n(x - w / 2)}" y="{_n(y - 8)}" width="{_n(w)}" '
        f'height="16.0" rx="3.0" fill="#ffffff" fill-opacity="0.9"/>'
        f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="middle" dominant-baseline="central" '
        f'font-size="{NOTE_SIZE}" fill="{_INK}">{escape(text)}</text></g>'
    )
