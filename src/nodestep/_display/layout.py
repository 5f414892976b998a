"""A layered layout in pure Python, for drawing a graph where Graphviz is not installed.

The method is Sugiyama's, kept small because flows are small (tens of nodes):

1. Arrows that close a loop are set aside (found by a depth-first walk from the first
   box), so the rest is acyclic; they are drawn afterwards as curves on the right.
2. Each box goes in the layer after its deepest predecessor (longest path); ``END``
   goes below everything. An arrow that spans several layers gets a waypoint in each
   layer between, so the ordering keeps room for it.
3. Within each layer, boxes are ordered by the mean position of their neighbours in
   the layer above, then below, a few sweeps (the barycentre heuristic).
4. Rows are spaced by their tallest box and centred on the widest row.

Every tie is broken by the diagram's order, so the same diagram gives the same layout.
"""

from __future__ import annotations

import itertools
import unicodedata
from dataclasses import dataclass, field

from nodestep._display.diagram import Arrow, ArrowStyle, Box, Diagram, visible

__all__ = ["Layout", "Placed", "Route", "layered_layout", "text_width"]

FONT_SIZE = 13
NOTE_SIZE = 11
_PAD_X = 14
_GAP_X = 28
_GAP_Y = 64
_WAYPOINT_WIDTH = 10
_MARGIN = 16
_SWEEPS = 4


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """Return the width ``text`` takes in a sans-serif font of ``size`` px, estimated.

    Why an estimate: measuring needs a font file and a renderer; a wide character (CJK)
    counts as a square, any other as a bit over half a square, which is near enough to
    keep labels inside their boxes.
    """
    units = sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6 for ch in text)
    return units * size


@dataclass(frozen=True, slots=True)
class Placed:
    """A box's place: its centre, width and height, in px."""

    box: Box
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Route:
    """An arrow's path: points from source to target; ``loop`` for an arrow drawn as a
    curve on the right (one that goes back up, or to its own box)."""

    arrow: Arrow
    points: tuple[tuple[float, float], ...]
    loop: bool = False


@dataclass(slots=True)
class Layout:
    """Where everything goes: boxes by id, routes in the diagram's order, and the size."""

    boxes: dict[str, Placed] = field(default_factory=dict)
    routes: list[Route] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0


def layered_layout(diagram: Diagram) -> Layout:
    """Lay ``diagram`` out top to bottom; see the module docstring for the method."""
    ids = [box.id for box in diagram.boxes]
    arrows = _merged(diagram.arrows)
    back = _back_arrows(ids, arrows)
    forward = [a for a in arrows if a not in back]
    layer = _layers(ids, forward)
    rows, chains = _rows(ids, layer, forward)
    _order(rows, forward, chains)
    sizes = {box.id: _box_size(box) for box in diagram.boxes}
    layout = _place(rows, sizes, {box.id: box for box in diagram.boxes})
    for arrow in arrows:
        layout.routes.append(_route(arrow, layout, chains.get(arrow, ()), arrow in back))
    _fit(layout)
    return layout


def _merged(arrows: tuple[Arrow, ...]) -> list[Arrow]:
    """One arrow per (source, target, style); the labels of the others joined to it."""
    first: dict[tuple[str, str, ArrowStyle], list[str]] = {}
    for arrow in arrows:
        labels = first.setdefault((arrow.source, arrow.target, arrow.style), [])
        if arrow.label and arrow.label not in labels:
            labels.append(arrow.label)
    return [Arrow(s, t, style, " | ".join(labels)) for (s, t, style), labels in first.items()]


def _back_arrows(ids: list[str], arrows: list[Arrow]) -> set[Arrow]:
    """The arrows that close a loop in a depth-first walk (self-loops among them)."""
    out: dict[str, list[Arrow]] = {i: [] for i in ids}
    for arrow in arrows:
        out[arrow.source].append(arrow)
    state: dict[str, int] = {}  # 1 on the walk's path, 2 done
    back: set[Arrow] = set()
    for root in ids:
        if root in state:
            continue
        stack = [(root, iter(out[root]))]
        state[root] = 1
        while stack:
            at, todo = stack[-1]
            step = next(todo, None)
            if step is None:
                state[at] = 2
                stack.pop()
            elif state.get(step.target) == 1:
                back.add(step)
            elif step.target not in state:
                state[step.target] = 1
                stack.append((step.target, iter(out[step.target])))
    return back


def _layers(ids: list[str], arrows: list[Arrow]) -> dict[str, int]:
    """Each box's layer: one below its deepest predecessor; ``END`` below everything."""
    preds: dict[str, list[str]] = {i: [] for i in ids}
    for arrow in arrows:
        preds[arrow.target].append(arrow.source)
    layer: dict[str, int] = {}

    def depth(start: str) -> int:
        stack = [start]
        while stack:  # iterative, so a long chain cannot reach the recursion limit
            at = stack[-1]
            missing = [p for p in preds[at] if p not in layer]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            layer[at] = 1 + max((layer[p] for p in preds[at]), default=-1)
        return layer[start]

    for i in ids:
        depth(i)
    if "END" in layer:
        layer["END"] = 1 + max((v for k, v in layer.items() if k != "END"), default=-1)
    return layer


def _rows(
    ids: list[str], layer: dict[str, int], arrows: list[Arrow]
) -> tuple[list[list[str]], dict[Arrow, tuple[str, ...]]]:
    """The layers as rows of ids (waypoints included), and each long arrow's waypoints."""
    rows: list[list[str]] = [[] for _ in range(max(layer.values(), default=0) + 1)]
    for i in ids:
        rows[layer[i]].append(i)
    chains: dict[Arrow, tuple[str, ...]] = {}
    for n, arrow in enumerate(arrows):
        low, high = layer[arrow.source], layer[arrow.target]
        if high - low > 1:
            points = tuple(f"\0{n}.{k}" for k in range(low + 1, high))
            for k, point in zip(range(low + 1, high), points, strict=True):
                rows[k].append(point)
            chains[arrow] = points
    return rows, chains


def _order(
    rows: list[list[str]], arrows: list[Arrow], chains: dict[Arrow, tuple[str, ...]]
) -> None:
    """Order each row by the barycentre of its neighbours, sweeping down then up."""
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for arrow in arrows:
        if arrow.source == arrow.target:
            continue
        path = [arrow.source, *chains.get(arrow, ()), arrow.target]
        for a, b in itertools.pairwise(path):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
    for _ in range(_SWEEPS):
        for k in range(1, len(rows)):
            _sort_row(rows[k], rows[k - 1], up)
        for k in range(len(rows) - 2, -1, -1):
            _sort_row(rows[k], rows[k + 1], down)


def _sort_row(row: list[str], other: list[str], links: dict[str, list[str]]) -> None:
    where = {i: n for n, i in enumerate(other)}
    keys: dict[str, float] = {}
    for n, i in enumerate(row):
        near = [where[j] for j in links.get(i, ()) if j in where]
        keys[i] = sum(near) / len(near) if near else float(n)
    position = {i: n for n, i in enumerate(row)}
    row.sort(key=lambda i: (keys[i], position[i]))


def _box_size(box: Box) -> tuple[float, float]:
    label, note = visible(box.label), visible(box.note)
    width = max(text_width(label), text_width(note, NOTE_SIZE)) + 2 * _PAD_X
    height = 46.0 if box.note else 32.0
    if box.kind == "subgraph":
        width, height = width + 8, height + 8
    return max(width, 56.0), height


def _place(
    rows: list[list[str]], sizes: dict[str, tuple[float, float]], boxes: dict[str, Box]
) -> Layout:
    layout = Layout()
    widths = [
        sum(sizes.get(i, (_WAYPOINT_WIDTH, 0.0))[0] for i in row) + _GAP_X * (len(row) - 1)
        for row in rows
    ]
    widest = max(widths, default=0.0)
    y = float(_MARGIN)
    for row, row_width in zip(rows, widths, strict=True):
        tallest = max((sizes.get(i, (0.0, 0.0))[1] for i in row), default=0.0)
        x = _MARGIN + (widest - row_width) / 2
        for i in row:
            w, h = sizes.get(i, (_WAYPOINT_WIDTH, 0.0))
            placed = Placed(
                boxes[i] if i in boxes else Box(i, ""), x + w / 2, y + tallest / 2, w, h
            )
            layout.boxes[i] = placed
            x += w + _GAP_X
        y += tallest + _GAP_Y
    layout.width = widest + 2 * _MARGIN
    layout.height = y - _GAP_Y + _MARGIN
    return layout


def _route(arrow: Arrow, layout: Layout, points: tuple[str, ...], back: bool) -> Route:
    src, tgt = layout.boxes[arrow.source], layout.boxes[arrow.target]
    if back and tgt.y < src.y and points == () and _one_row_apart(src, tgt):
        # one row back up: from the source's top to the target's bottom, right of centre,
        # so it does not lie on an arrow going down between the same two boxes
        start = (src.x + src.width / 4, src.y - src.height / 2)
        return Route(arrow, (start, (tgt.x + tgt.width / 4, tgt.y + tgt.height / 2)))
    if back:  # out of the source's right side, round everything between, into the target's
        top, bottom = min(src.y, tgt.y), max(src.y, tgt.y)
        right = max(p.x + p.width / 2 for p in layout.boxes.values() if top <= p.y <= bottom)
        shift = 6.0 if arrow.source == arrow.target else 0.0
        start = (src.x + src.width / 2, src.y - shift)
        end = (tgt.x + tgt.width / 2, tgt.y + shift)
        bend = right + 30.0
        return Route(arrow, (start, (bend, start[1]), (bend, end[1]), end), loop=True)
    path = [(src.x, src.y + src.height / 2)]
    path += [(layout.boxes[p].x, layout.boxes[p].y) for p in points]
    path.append((tgt.x, tgt.y - tgt.height / 2))
    return Route(arrow, tuple(path))


def _one_row_apart(src: Placed, tgt: Placed) -> bool:
    return src.y - tgt.y < src.height / 2 + tgt.height / 2 + _GAP_Y + 1


def _fit(layout: Layout) -> None:
    """Widen the drawing to hold the loops drawn right of the boxes, and drop waypoints."""
    for key in [k for k in layout.boxes if k.startswith("\0")]:
        del layout.boxes[key]
    reach = max((x for r in layout.routes for x, _ in r.points), default=0.0)
    layout.width = max(layout.width, reach + _MARGIN + 40)
