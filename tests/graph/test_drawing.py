"""Describing a graph: a Mermaid flowchart, and a spec as data or JSON."""

from __future__ import annotations

import json

import pytest

from nodestep import END, START, BaseState, Command, Graph, GraphConfigError, branch, node, when


class S(BaseState):
    count: int = 0


def is_big(state: S) -> bool:
    return state.count > 10


def pick(state: S) -> str:
    return "left"


@node
def intake(state):
    return None


@node(goto=["finish", END])
async def review(state):
    return Command(goto=END)


@node(timeout=1.5)
def left(state):
    return None


@node
def right(state):
    return None


@node
def finish(state):
    return None


def _graph() -> Graph[S]:
    return Graph(S, name="flowchart", max_steps=7, timeout=30).flow(
        START >> intake,
        intake >> when(is_big, review, otherwise=right),
        right >> branch(pick, {"left": left, "stop": END}),
        left >> END,
        finish >> END,
    )


def test_mermaid_draws_nodes_edges_branch_labels_and_dashed_gotos():
    assert _graph().to_mermaid() == (
        "flowchart TD\n"
        "  START([START])\n"
        '  intake["intake"]\n'
        '  review["review"]\n'
        '  right["right"]\n'
        '  left["left"]\n'
        '  finish["finish"]\n'
        "  END([END])\n"
        "  START --> intake\n"
        '  intake -- "is_big" --> review\n'
        '  intake -- "otherwise" --> right\n'
        "  review -.-> END\n"
        "  review -.-> finish\n"
        '  right -- "left" --> left\n'
        '  right -- "stop" --> END\n'
        "  left --> END\n"
        "  finish --> END\n"
    )


def test_mermaid_draws_plain_edges_solid():
    @node
    def a(state):
        return None

    @node
    def b(state):
        return None

    text = Graph(S).flow(START >> a, a >> b, b >> END).to_mermaid()
    assert "  START --> a\n  a --> b\n  b --> END\n" in text
    assert "-.->" not in text


def test_mermaid_gives_awkward_node_names_safe_ids_and_quoted_labels():
    @node(name="end")
    def finale(state):
        return None

    @node(name='say "hi" now')
    def speak(state):
        return None

    text = Graph(S).flow(START >> speak, speak >> finale, finale >> END).to_mermaid()
    assert '  say__hi__now["say #quot;hi#quot; now"]\n' in text
    assert '  n_end["end"]\n' in text
    assert "  say__hi__now --> n_end\n" in text
    assert "  n_end --> END\n" in text


def test_spec_describes_the_graph_as_data():
    spec = _graph().to_spec()
    module = __name__
    assert spec == {
        "name": "flowchart",
        "state": f"{module}:S",
        "max_steps": 7,
        "timeout": 30.0,
        "start": "intake",
        "nodes": [
            {
                "name": "intake",
                "function": f"{module}:intake",
                "async": False,
                "goto": [],
                "timeout": None,
            },
            {
                "name": "review",
                "function": f"{module}:review",
                "async": True,
                "goto": ["END", "finish"],
                "timeout": None,
            },
            {
                "name": "right",
                "function": f"{module}:right",
                "async": False,
                "goto": [],
                "timeout": None,
            },
            {
                "name": "left",
                "function": f"{module}:left",
                "async": False,
                "goto": [],
                "timeout": 1.5,
            },
            {
                "name": "finish",
                "function": f"{module}:finish",
                "async": False,
                "goto": [],
                "timeout": None,
            },
        ],
        "edges": [
            {"from": "START", "to": "intake"},
            {
                "from": "intake",
                "when": {"predicate": f"{module}:is_big", "then": "review", "otherwise": "right"},
            },
            {
                "from": "right",
                "branch": {"router": f"{module}:pick", "mapping": {"left": "left", "stop": "END"}},
            },
            {"from": "left", "to": "END"},
            {"from": "finish", "to": "END"},
        ],
    }


def test_json_is_the_spec_as_indented_text():
    graph = _graph()
    text = graph.to_json()
    assert json.loads(text) == graph.to_spec()
    assert text.startswith('{\n  "name": "flowchart"')


def test_drawing_a_graph_without_a_flow_is_a_config_error():
    graph = Graph(S, name="empty")
    for describe in (graph.to_mermaid, graph.to_spec, graph.to_json):
        with pytest.raises(GraphConfigError, match="Graph 'empty' has no flow yet"):
            describe()
