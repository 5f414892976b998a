"""A condition that starts with ``!`` in a manifest: YAML reads it as a tag unless quoted.

The condition language spells negation ``!`` as well as ``not``; YAML takes an unquoted
``!done`` for a tag. The loader's error says to quote it, and the quoted form runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
