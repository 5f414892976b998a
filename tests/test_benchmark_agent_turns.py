"""W10's builders (benchmarks/workloads_agent_turns.py) do the work they are timed for."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def turns() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))  # the workloads import the harness by its name
    try:
        import workloads_agent_turns

        yield workloads_agent_turns
        workloads_agent_turns.close()
    finally:
        sys.path.remove(str(BENCHMARKS))


def _steps(path: Path) -> list[tuple[str, int, list[dict[str, object]]]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT thread, seq, body FROM steps ORDER BY rowid").fetchall()
    return [(thread, seq, orjson.loads(body)) for thread, seq, body in rows]


def test_the_floor_commits_each_step_of_each_turn(turns: ModuleType, tmp_path: Path) -> None:
    new = turns.floor_conversations(str(tmp_path), 3, "FULL", "t")
    assert turns.three_turns(new)() > 0
    other = new()
    assert other() > 0
    steps = _steps(tmp_path / "w10-t.sqlite")
    assert len(steps) == 3 * 3 + 3  # three steps a turn: call, result, answer
    first = [step for step in steps if step[0] == steps[0][0]]
    assert [seq for _, seq, _ in first] == [2, 3, 4, 6, 7, 8, 10, 11, 12]
    asked, called = first[0][2]
    assert asked == {"role": "user", "content": turns.question(0)}
    assert called["tool_calls"] == [{"name": "lookup_order", "args": {"order": 0}, "id": "call-0"}]
    assert first[1][2] == [{"role": "tool", "content": turns.shipping(0), "tool_call_id": "call-0"}]
    assert first[-1][2] == [{"role": "assistant", "content": turns.answer(2)}]
    assert {thread for thread, _, _ in steps} == {steps[0][0], steps[-1][0]}  # two threads


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_the_floor_flushes_a_turns_last_commit_under_full_only(
    turns: ModuleType, tmp_path: Path, synchronous: str
) -> None:
    conversation = turns.floor_conversations(str(tmp_path), 1, synchronous, "t")()
    seen: list[str] = []
    turns._floors[-1].set_trace_callback(seen.append)
    conversation()
    seen = [statement.split(" (")[0] for statement in seen]  # the inserts without their values
    commits = ["BEGIN IMMEDIATE", "INSERT INTO steps VALUES", "COMMIT"]
    flushed = ["PRAGMA synchronous=FULL", *commits, "PRAGMA synchronous=NORMAL"]
    assert seen == commits * 2 + (flushed if synchronous == "FULL" else commits)


def test_the_floor_refuses_a_turn_its_script_has_no_reply_for(
    turns: ModuleType, tmp_path: Path
) -> None:
    conversation = turns.floor_conversations(str(tmp_path), 1, "NORMAL", "t")()
    conversation()
    with pytest.raises(AssertionError, match="floor turn 1: past the script"):
        conversation()


def test_the_nodestep_side_answers_each_turn(turns: ModuleType, tmp_path: Path) -> None:
    new = turns.nodestep_conversations(str(tmp_path), 3, "NORMAL", "t")
    assert turns.three_turns(new)() > 0  # each turn checks its status and its answer
