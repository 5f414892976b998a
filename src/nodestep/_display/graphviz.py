"""Lay a diagram out with Graphviz's ``dot`` program, when it is installed.

``dot`` draws the same boxes and arrow styles as ``_display.svg`` and routes edges
better on large graphs. Its SVG is trimmed to the ``<svg>`` element (no XML prolog, no
DOCTYPE, no comment naming the Graphviz version), so it can be put inside HTML and does
not change with the installed version's banner.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from nodestep._display.diagram import Arrow, Box, Diagram, visible
from nodestep._display.svg import FONT_FAMILY
from nodestep._errors import GraphConfigError

__all__ = ["dot_program", "dot_source", "graphviz_svg"]

_SHAPES = {
    "node": 'shape=box style="rounded,filled" fillcolor="#eef3fb"',
    "deferred": 'shape=box style="rounded,filled,dashed" fillcolor="#f6f6f6"',
    "subgraph": 'shape=box peripheries=2 style="rounded,filled" fillcolor="#f1f8ee"',
    "terminal": 'shape=box style="rounded,filled" fillcolor="#e6e6e6"',
}
_ARROWS = {
    "edge": "",
    "join": " penwidth=2.6",
    "route": "",
    "goto": ' style=dashed color="#8a94a3"',
}
_TIMEOUT = 30.0


def dot_program() -> str | None:
    """Return the path of Graphviz's ``dot`` on ``PATH``, or ``None``."""
    return shutil.which("dot")


def _quote(text: str) -> str:
    """Quote ``text`` as a DOT string that ``dot`` draws exactly as written.

    A backslash starts DOT's escapes (``\\N`` is the node's name) and ``&`` an HTML
    entity in a label, so both are escaped too, not only the quote; an unprintable
    character is written as its escape first (``visible``).
    """
    out = []
    for ch in visible(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "&":
            out.append("&amp;")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _box_line(box: Box) -> str:
    label = _quote(box.label)[:-1] + ("\\n" + _quote(box.note)[1:-1] if box.note else "") + '"'
    return f"  {box.id} [label={label} {_SHAPES[box.kind]}];"


def _arrow_line(arrow: Arrow) -> str:
    label = f" label={_quote(arrow.label)}" if arrow.label else ""
    return f"  {arrow.source} -> {arrow.target} [{_ARROWS[arrow.style]}{label}];".replace("[ ", "[")


def dot_source(diagram: Diagram) -> str:
    """Return ``diagram`` as a DOT program (top to bottom, in the diagram's order)."""
    font = f"fontname={_quote(FONT_FAMILY)} fontsize=13"
    lines = [
        "digraph nodestep {",
        f"  graph [rankdir=TB ordering=out bgcolor=white {font} tooltip={_quote(diagram.title)}];",
        f'  node [{font} color="#2d3b4e" fontcolor="#2d3b4e" height=0.4];',
        f'  edge [fontname={_quote(FONT_FAMILY)} fontsize=11 color="#2d3b4e" arrowsize=0.7];',
    ]
    lines += [_box_line(box) for box in diagram.boxes]
    lines += [_arrow_line(arrow) for arrow in diagram.arrows]
    if any(box.id == "END" for box in diagram.boxes):
        lines.append("  { rank=sink; END; }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def graphviz_svg(diagram: Diagram, program: str) -> str:
    """Return ``diagram`` as SVG drawn by the ``dot`` at ``program``.

    Raises:
        GraphConfigError: ``dot`` failed or took longer than 30 s; the message has its
            error output and the fix (``layout="python"``).
    """
    try:
        done = subprocess.run(
            [program, "-Tsvg"],
            input=dot_source(diagram).encode(),
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GraphConfigError(
            f"Graphviz's dot ({program}) could not draw the graph: {exc}; "
            f"draw it without Graphviz with layout='python'"
        ) from exc
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()
        raise GraphConfigError(
            f"Graphviz's dot ({program}) exited with {done.returncode}: {err}; "
            f"draw it without Graphviz with layout='python'"
        )
    svg = done.stdout.decode()
    svg = svg[svg.index("<svg") :]
    return re.sub(r"<!--.*?-->\n?", "", svg, flags=re.DOTALL)
