"""A graph's name: shown in errors, events and drawings, so it must say something."""

from __future__ import annotations

import pytest

from nodestep import BaseState, Graph, GraphConfigError


class S(BaseState):
    count: int = 0


@pytest.mark.parametrize("name", ["", " ", "\t\n", "\u3000"])
def test_blank_graph_name_is_refused_with_the_fix(name: str):
    with pytest.raises(
        GraphConfigError, match=r"name must be a non-blank string.*name='support_bot'"
    ):
        Graph(S, name=name)


def test_graph_name_that_is_not_a_string_is_refused():
    with pytest.raises(GraphConfigError, match="non-blank string, got 42"):
        Graph(S, name=42)  # type: ignore[arg-type]


def test_graph_name_with_words_is_kept():
    assert Graph(S, name=" support bot ").name == " support bot "
    assert Graph(S).name == "graph"
