"""A manifest problem shows a list or mapping culprit as the user wrote it, never the
loader's wrappers (``Y(value=..., file=...)``) around each item."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import BaseState, GraphConfigError, load_graph


class Ticket(BaseState):
    status: str = ""


def work(ticket: Ticket) -> dict[str, object]:
    return {}


HEADER = f"nodestep: 1\nkind: Graph\nname: g\nstate: {__name__}:Ticket\nstart: work\n"
NODE = "nodes:\n  - {name: work, function: '" + __name__ + ":work', edges: [{target: END}]}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nodestep: 1\nkind: [Graph]\n", "unknown document kind ['Graph']; the kinds are"),
        (HEADER.replace("nodestep: 1", "nodestep: [1]") + NODE, "has version [1]; start it"),
        (HEADER.replace("name: g", "name: [g]") + NODE, "non-blank string, got ['g']"),
        (HEADER + "max_steps: [3]\n" + NODE, "at least 1, got [3]"),
        (HEADER + "timeout: {s: [3]}\n" + NODE, "number of seconds, got {'s': [3]}"),
        (HEADER + "context: [a]\n" + NODE, "the name), got ['a']"),
        (HEADER + NODE.replace("function:", "type: [a, [b]], function:"), "type ['a', ['b']]"),
        (HEADER + NODE.replace("END}", "[END]}"), "unknown target ['END']; a target is"),
        (HEADER + NODE.replace("END}", "END, when: [a]}"), "condition string, got ['a']"),
        (HEADER + NODE.replace("work,", "work, [k]: 1,"), "a key must be a string, got ['k']"),
    ],
)  # fmt: skip
def test_a_problem_shows_a_list_or_mapping_as_written(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "graph.yaml"
    path.write_text(text)
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    problems = caught.value.problems
    assert any(expected in problem for problem in problems), problems
    assert not any("Y(value=" in problem for problem in problems), problems
