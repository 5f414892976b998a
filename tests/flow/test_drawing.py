"""Describing a graph: a Mermaid flowchart, and a spec as data or JSON."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# -- Mermaid labels that would break the diagram -----------------------------------------

_LABEL = re.compile(r'"([^"]*)"')
_NODE_LINE = re.compile(r'^  ([A-Za-z0-9_]+)\["([^"<>`\n]*)"\]$')


def _unescape(text: str) -> str:
    named = {"quot": '"', "lt": "<", "gt": ">", "amp": "&"}
    return re.sub(r"#(\w+);", lambda m: named.get(m[1]) or chr(int(m[1])), text)


def _branching_graph(names: list[str], keys: list[str]) -> Graph[S]:
    first, *rest = [node(name=n)(_noop) for n in names]

    def route(state: S) -> str:
        return keys[0]

    targets = rest or [END]
    mapping = {k: targets[i % len(targets)] for i, k in enumerate(keys)}
    return Graph(S).flow(START >> first, first >> branch(route, mapping), *(n >> END for n in rest))


def _noop(state: S) -> None:
    return None


def test_mermaid_escapes_newlines_angle_brackets_and_quotes_in_names_and_keys():
    text = _branching_graph(
        ['line one\nline "two"', "<script>"], ["a > b", 'say "yes"\r\n', "#quot; & `x`"]
    ).to_mermaid()
    assert '  line_one_line__two_["line one#10;line #quot;two#quot;"]\n' in text
    assert '  _script_["#lt;script#gt;"]\n' in text
    assert '  line_one_line__two_ -- "a #gt; b" --> _script_\n' in text
    assert '  line_one_line__two_ -- "say #quot;yes#quot;#13;#10;" --> _script_\n' in text
    assert '  line_one_line__two_ -- "#35;quot; #amp; #96;x#96;" --> _script_\n' in text


_names = st.text(min_size=1, max_size=12).filter(
    lambda n: n.strip() and n not in ("START", "END") and not re.search(r"\[\d+\]$", n)
)


@given(
    names=st.lists(_names, min_size=1, max_size=4, unique=True),
    # At least one key per node after the first, so that every node is reachable.
    keys=st.lists(st.text(max_size=12), min_size=3, max_size=5, unique=True),
)
def test_mermaid_quotes_every_label_and_draws_any_name_as_written(
    names: list[str], keys: list[str]
):
    text = _branching_graph(names, keys).to_mermaid()
    lines = text.split("\n")[:-1]
    # No name or key adds a line: a line break in one would end the statement.
    assert len(lines) == 3 + len(names) + 1 + len(keys) + (len(names) - 1)
    drawn = [m for m in map(_NODE_LINE.match, lines) if m]
    assert [_unescape(m[2]) for m in drawn] == names
    assert len({m[1] for m in drawn}) == len(names), "two nodes share a Mermaid id"
    labels = [_LABEL.search(line) for line in lines if " -- " in line]
    assert [_unescape(m[1]) for m in labels if m] == keys
    for line in lines:
        inside = "".join(_LABEL.findall(line))
        assert not set(inside) & set('<>"`\n\r\x85\u2028\u2029'), line
        assert line.isprintable(), line


# -- specs that could not be loaded back ---------------------------------------------------


def test_spec_refuses_a_lambda_node_naming_the_fix():
    double = node(lambda state: {"count": state.count * 2}, name="double")
    graph = Graph(S, name="calc").flow(START >> double, double >> END)
    with pytest.raises(
        GraphConfigError,
        match=(
            r"(?s)Graph 'calc' cannot be written as a spec that loads back:\n"
            r"- Node 'double' runs a function that has no import path \('[^']*<lambda>'\); "
            r"a spec names functions by import path, so define it with def"
        ),
    ):
        graph.to_spec()
    with pytest.raises(GraphConfigError, match="Node 'double' runs a function"):
        graph.to_json()
    assert 'double["double"]' in graph.to_mermaid()  # drawing it still works


def test_spec_refuses_branch_keys_that_read_the_same_as_text():
    graph = Graph(S, name="keys").flow(
        START >> intake, intake >> branch(pick, {1: left, "1": right}), left >> END, right >> END
    )
    with pytest.raises(
        GraphConfigError,
        match=(
            r"The branch\(\) after 'intake' has the keys 1 and '1', which a spec would both "
            r"write as '1'; use keys that differ as text"
        ),
    ) as caught:
        graph.to_spec()
    assert len(caught.value.problems) == 1


def test_spec_lists_every_part_without_an_import_path_at_once():
    class Local(BaseState):
        count: int = 0

    @node
    def step(state: Local) -> None:
        return None

    graph = Graph(Local, name="local").flow(
        START >> step, step >> when(lambda state: True, END, otherwise=step)
    )
    with pytest.raises(GraphConfigError, match="cannot be written as a spec") as caught:
        graph.to_spec()
    problems = caught.value.problems
    assert len(problems) == 3
    assert problems[0].startswith("The state class 'Local' has no import path (")
    assert "<locals>.Local" in problems[0]
    assert problems[1].startswith("Node 'step' runs a function that has no import path")
    assert problems[2].startswith("The when() predicate after 'step' has no import path")


class Scorer:
    def score(self, state: S) -> None:
        return None


def test_spec_refuses_a_bound_method_node():
    scored = node(Scorer().score, name="scored")
    graph = Graph(S, name="methods").flow(START >> scored, scored >> END)
    with pytest.raises(
        GraphConfigError, match="Node 'scored' runs a function that is a bound method; a spec"
    ):
        graph.to_spec()
