"""A condition that starts with ``!`` in a manifest: YAML reads it as a tag unless quoted.

The condition language spells negation ``!`` as well as ``not``; YAML takes an unquoted
``!done`` for a tag. The loader's error says to quote it, and the quoted form runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import BaseState, GraphConfigError, load_graph


class Job(BaseState):
    done: bool = False
    tries: int = 0


def attempt(job: Job) -> dict[str, object]:
    return {"tries": job.tries + 1, "done": job.tries >= 2}


def manifest(tmp_path: Path, condition: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        f"""\
nodestep: 1
kind: Graph
name: job
state: tests.declarative.test_quoted_conditions:Job
start: attempt
nodes:
  - name: attempt
    function: tests.declarative.test_quoted_conditions:attempt
    edges:
      - target: attempt
        when: {condition}
      - target: END
"""
    )
    return path


@pytest.mark.parametrize("condition", ["!done && tries < 5", "!done"])
def test_an_unquoted_bang_condition_is_refused_with_the_quoting_fix(
    tmp_path: Path, condition: str
) -> None:
    with pytest.raises(GraphConfigError) as caught:
        load_graph(manifest(tmp_path, condition))
    message = str(caught.value)
    assert "job.yaml:11:" in message
    assert "must be quoted: '!done'" in message


def test_a_quoted_bang_condition_runs(tmp_path: Path) -> None:
    graph = load_graph(manifest(tmp_path, "'!done && tries < 5'"))
    state = graph.invoke({}).state
    assert (state.done, state.tries) == (True, 3)


# -- a condition's error points at its place in the file, whatever the scalar's style ----

PIECES = ["done", "tries < 5", "not done", "'it\\'s' != \"a\\\"b\"", '"x" == "y"']


def scalar(style: str, lines: list[str]) -> str:
    """Write ``lines`` (joined by a space, or a line break in a literal block) as a
    YAML scalar of ``style``, continuation lines indented under ``when:``."""
    pad = "\n          "
    if style == "plain":
        return pad.join(lines)
    if style == "single":
        return "'" + pad.join(line.replace("'", "''") for line in lines) + "'"
    if style == "double":
        escaped = [line.replace("\\", "\\\\").replace('"', '\\"') for line in lines]
        return '"' + pad.join(escaped) + '"'
    return ("|-" if style == "literal" else ">-") + pad + pad.join(lines)


@settings(max_examples=150, deadline=None)
@given(
    before=st.lists(st.sampled_from(PIECES), max_size=3),
    style=st.sampled_from(["plain", "single", "double", "literal", "folded"]),
    breaks=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_a_condition_error_points_at_its_column_in_any_scalar_style(
    tmp_path_factory: pytest.TempPathFactory, before: list[str], style: str, breaks: list[bool]
) -> None:
    words = ["tries > 0", *before, "tries == 'x'"]  # plain YAML takes no quote first
    # Conjuncts on one line, or one a line: a literal block keeps the breaks, the others
    # fold them into spaces.
    lines: list[str] = [words[0]]
    for word, new_line in zip(words[1:], breaks, strict=False):
        if new_line:
            lines[-1] += " and"
            lines.append(word)
        else:
            lines[-1] += f" and {word}"
    path = manifest(tmp_path_factory.mktemp("m"), scalar(style, lines))
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    (problem,) = caught.value.problems
    assert "compares a number with a string" in problem
    line, column = map(int, problem.split(": ")[0].rsplit(":", 2)[1:])
    written = path.read_text().splitlines()[line - 1]
    assert written[column - 1 :].startswith("== "), (problem, written)


def test_a_condition_whose_characters_cannot_be_placed_is_placed_at_its_start(
    tmp_path: Path,
) -> None:
    # An explicit indentation indicator (|2-) is not mapped character by character.
    path = manifest(tmp_path, "|2-\n          tries > 0 and\n          tries == 'x'")
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:11:15: condition ")
    assert "(where the text starts: the place inside it cannot be told)" in problem
