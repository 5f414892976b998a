"""Without PyYAML, manifests say which extra to install; conditions work without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nodestep import END, START, BaseState, Graph, GraphConfigError, load_graph, node, when


class Flag(BaseState):
    on: bool = False


@node
def toggle(state: Flag) -> dict[str, bool]:
    return {"on": not state.on}


def test_a_missing_yaml_extra_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # makes "import yaml" fail
    (tmp_path / "g.yaml").write_text("nodestep: 1\n", encoding="utf-8")
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[yaml\]'"):
        load_graph(tmp_path)
    graph = Graph(Flag).flow(START >> toggle, toggle >> when("on", END, otherwise=toggle))
    assert graph.invoke({}).state.on is True
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[yaml\]'"):
        graph.to_yaml()
