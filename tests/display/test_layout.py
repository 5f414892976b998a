"""The pure-Python layered layout: boxes never overlap, arrows go down, ties are stable."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep._display.diagram import Arrow, Box, Diagram
from nodestep._display.layout import layered_layout
from nodestep._display.svg import python_svg


@st.composite
def diagrams(draw: st.DrawFn) -> Diagram:
    count = draw(st.integers(min_value=1, max_value=12))
    ids = ["START", *(f"n{i}" for i in range(count)), "END"]
    pairs = st.tuples(st.sampled_from(ids[:-1]), st.sampled_from(ids[1:]))
    links = draw(st.lists(pairs, max_size=30))
    labels = st.sampled_from(["", "yes", "a much longer label"])
    arrows = [Arrow(s, t, "route", draw(labels)) for s, t in links]
    names = st.text(min_size=1, max_size=20)
    boxes = [Box(i, draw(names) if i.startswith("n") else i) for i in ids]
    return Diagram("random", tuple(boxes), (Arrow("START", "n0"), *arrows))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(diagrams())
def test_boxes_of_a_row_never_overlap_and_stay_inside_the_drawing(diagram: Diagram) -> None:
    layout = layered_layout(diagram)
    placed = sorted(layout.boxes.values(), key=lambda p: (p.y, p.x))
    assert {p.box.id for p in placed} == {b.id for b in diagram.boxes}
    for left, right in itertools.pairwise(placed):
        if left.y == right.y:
            assert left.x + left.width / 2 < right.x - right.width / 2
    for p in placed:
        assert p.x - p.width / 2 >= 0 and p.x + p.width / 2 <= layout.width
        assert p.y - p.height / 2 >= 0 and p.y + p.height / 2 <= layout.height


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(diagrams())
def test_end_is_the_lowest_box_and_every_straight_arrow_points_down(diagram: Diagram) -> None:
    layout = layered_layout(diagram)
    end = layout.boxes["END"]
    assert all(p.y < end.y for key, p in layout.boxes.items() if key != "END")
    for route in layout.routes:
        if not route.loop and len(route.points) > 2:
            ys = [y for _, y in route.points]
            assert ys == sorted(ys)


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(diagrams())
def test_the_same_diagram_gives_the_same_svg(diagram: Diagram) -> None:
    assert python_svg(diagram) == python_svg(diagram)


@pytest.mark.slow
def test_a_chain_of_thousands_of_boxes_lays_out_without_recursion() -> None:
    ids = [f"n{i}" for i in range(3000)]
    boxes = tuple(Box(i, i) for i in ids)
    arrows = tuple(Arrow(a, b) for a, b in itertools.pairwise(ids))
    layout = layered_layout(Diagram("chain", boxes, arrows))
    assert layout.boxes["n2999"].y > layout.boxes["n0"].y
