"""A node named as one of Mermaid's own words still draws: its id is another.

Mermaid's flowchart parser fails the whole diagram on a node whose id is ``click``,
``style``, ``class`` and the like (Mermaid 11: "Parse error on line 3"), so ``to_mermaid``
gives such a node the id ``n_<name>``, as it did for ``end`` and ``graph``; the label
still says the name.
"""

from __future__ import annotations

import pytest

from nodestep import END, START, BaseState, Graph, node


class S(BaseState):
    n: int = 0


def step(state: S) -> dict[str, int]:
    return {"n": state.n + 1}


@pytest.mark.parametrize(
    "word",
    [
        "click",
        "style",
        "class",
        "classDef",
        "linkStyle",
        "subgraph",
        "call",
        "href",
        "interpolate",
        "_self",
        "_blank",
        "_parent",
        "_top",
        "end",
        "graph",
        "flowchart",
    ],
)
def test_a_node_named_as_a_mermaid_word_gets_another_id(word: str) -> None:
    named = node(step, name=word)
    text = Graph(S).flow(START >> named, named >> END).to_mermaid()
    assert f'  n_{word}["{word}"]\n' in text
    assert f"  START --> n_{word}\n  n_{word} --> END\n" in text
    assert f"  {word}[" not in text and f" {word} -->" not in text
