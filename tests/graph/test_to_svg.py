"""``Graph.to_svg``: a drawing made offline, with Graphviz or without, the same each time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nodestep import END, START, BaseState, Graph, GraphConfigError, branch, node, when

SVG = "{http://www.w3.org/2000/svg}"
# .ci/run sets NODESTEP_REQUIRE_DISPLAY_TOOLS=1: there a missing dot fails these tests.
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None and os.environ.get("NODESTEP_REQUIRE_DISPLAY_TOOLS") != "1",
    reason="Graphviz's dot is missing",
)
LAYOUTS = [pytest.param("python", id="python"), pytest.param("graphviz", marks=needs_dot)]


class S(BaseState):
    n: int = 0


def _noop(state: S) -> None:
    return None


def _texts(svg: str) -> list[str]:
    """Every text the drawing shows, parsed as XML (so the SVG must be well-formed)."""
    root = ET.fromstring(svg)
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def _rich_graph() -> Graph[S]:
    """A loop, a condition, a fan-out, a join, a deferred node, a goto and a subgraph."""
    a, b, c, d, e = (node(name=n)(_noop) for n in "abcde")
    tail = node(name="tail", goto=["a"], defer=True)(_noop)
    inner = node(name="inner")(_noop)
    child = Graph(S, name="child").flow(START >> inner, inner >> END)
    return Graph(S, name="rich").flow(
        START >> a,
        a >> when("n < 3", b, otherwise=c),
        b >> a,
        c >> [d, e],
        [d, e] >> child,
        child >> tail,
        tail >> END,
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_drawing_shows_every_node_the_ends_and_the_route_labels(layout: Any) -> None:
    texts = " ".join(_texts(_rich_graph().to_svg(layout=layout)))
    for name in ["START", "END", "a", "b", "c", "d", "e", "child", "tail", "n < 3", "otherwise"]:
        assert name in texts
    assert "waits for d, e" in texts
    assert "subgraph · 1 node" in texts
    assert "deferred" in texts


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_same_graph_gives_the_same_svg(layout: Any) -> None:
    assert _rich_graph().to_svg(layout=layout) == _rich_graph().to_svg(layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_names_and_keys_are_escaped_and_shown_as_written(layout: Any) -> None:
    first = node(name='<script>alert("x")</script>')(_noop)
    second = node(name="a & b \\N")(_noop)
    graph = Graph(S, name="<g>").flow(
        START >> first,
        first >> branch(lambda s: "k", {"<b>bold</b>": second, "line\nbreak\x01": END}),
        second >> END,
    )
    svg = graph.to_svg(layout=layout)
    assert "<script" not in svg and "<b>" not in svg
    texts = _texts(svg)  # parsed, so the control character did not make it invalid XML
    assert '<script>alert("x")</script>' in texts
    assert "a & b \\N" in texts
    assert "<b>bold</b>" in " ".join(texts)
    assert "line\\nbreak\\x01" in " ".join(texts)


def test_the_drawing_is_self_contained_and_fetches_nothing() -> None:
    svg = _rich_graph().to_svg(layout="python")
    assert "<script" not in svg and "http://" not in svg.replace("http://www.w3.org/2000/svg", "")
    assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")


def test_the_python_layout_draws_each_arrow_style_its_own_way() -> None:
    root = ET.fromstring(_rich_graph().to_svg(layout="python"))
    classes = sorted({p.get("class", "") for p in root.iter(f"{SVG}path") if p.get("class")})
    assert classes == ["edge edge", "edge goto", "edge join", "edge route"]
    goto = next(p for p in root.iter(f"{SVG}path") if p.get("class") == "edge goto")
    assert goto.get("stroke-dasharray") == "6 4"


@needs_dot
def test_graphviz_output_has_no_prolog_or_version_banner() -> None:
    svg = _rich_graph().to_svg(layout="graphviz")
    assert svg.startswith("<svg") and "<!--" not in svg and "<?xml" not in svg


def test_auto_draws_without_graphviz_when_dot_is_not_on_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _rich_graph().to_svg() == _rich_graph().to_svg(layout="python")


def test_asking_for_graphviz_without_dot_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphConfigError, match=r"install Graphviz .* or use layout='python'"):
        _rich_graph().to_svg(layout="graphviz")


def test_a_dot_that_fails_falls_back_under_auto_and_is_reported_under_graphviz(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'Error: no layout' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _rich_graph().to_svg() == _rich_graph().to_svg(layout="python")
    with pytest.raises(GraphConfigError, match="exited with 3: Error: no layout"):
        _rich_graph().to_svg(layout="graphviz")


def test_an_unknown_layout_lists_the_known_ones() -> None:
    with pytest.raises(GraphConfigError, match="use one of auto, graphviz, python"):
        _rich_graph().to_svg(layout="neato")  # type: ignore[arg-type]


DRAW = """
import sys
sys.path.insert(0, {tests!r})
from test_to_svg import _rich_graph
sys.stdout.write(_rich_graph().to_svg(layout="python"))
"""


@pytest.mark.slow
def test_the_drawing_does_not_depend_on_the_process_or_its_hash_seed() -> None:
    code = DRAW.format(tests=str(Path(__file__).parent))
    drawings = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert drawings == {_rich_graph().to_svg(layout="python")}
