"""Draw a diagram as SVG: with Graphviz when it is installed, in pure Python otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from nodestep._errors import GraphConfigError

if TYPE_CHECKING:
    from nodestep._display.diagram import Diagram

__all__ = ["LAYOUTS", "SvgLayout", "diagram_svg"]

SvgLayout = Literal["auto", "graphviz", "python"]
LAYOUTS: tuple[str, ...] = ("auto", "graphviz", "python")


def diagram_svg(diagram: Diagram, layout: SvgLayout = "auto") -> str:
    """Return ``diagram`` as SVG text.

    Args:
        diagram: What to draw.
        layout: ``"graphviz"`` lays it out with Graphviz's ``dot``; ``"python"`` with
            nodestep's own layered layout; ``"auto"`` uses ``dot`` when it is on
            ``PATH`` and works, and nodestep's layout otherwise.

    Raises:
        GraphConfigError: an unknown ``layout``, or ``"graphviz"`` without ``dot`` on
            ``PATH`` or with a ``dot`` that fails.
    """
    # imported on the first drawing, so that importing nodestep costs nothing for it
    from nodestep._display.graphviz import dot_program, graphviz_svg
    from nodestep._display.svg import python_svg

    if layout not in LAYOUTS:
        raise GraphConfigError(
            f"Unknown layout {layout!r} for an SVG drawing; use one of {', '.join(LAYOUTS)}"
        )
    program = dot_program() if layout != "python" else None
    if layout == "graphviz" and program is None:
        raise GraphConfigError(
            "layout='graphviz' needs Graphviz's dot program on PATH, and there is none; "
            "install Graphviz (e.g. apt-get install graphviz) or use layout='python'"
        )
    if program is not None:
        try:
            return graphviz_svg(diagram, program)
        except GraphConfigError:
            if layout == "graphviz":
                raise
    return python_svg(diagram)
