"""W10's builders (benchmarks/workloads_agent_turns.py) do the work they are timed for."""

from __future__ import annotations

import sqlite3
import subprocess
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


def test_the_nodestep_side_in_memory_answers_each_turn_and_keeps_no_file(
    turns: ModuleType, tmp_path: Path
) -> None:
    new = turns.nodestep_conversations(str(tmp_path), 3, None, "t")
    assert turns.three_turns(new)() > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w10-specs"]


def test_a_nodestep_turn_on_sqlite_makes_the_transactions_the_report_counts(
    turns: ModuleType, tmp_path: Path
) -> None:
    # The store-share row's note counts them: every turn takes the lease with its input (a
    # new conversation's first too, opened as a new thread) and reads nothing outside.
    new = turns.nodestep_conversations(str(tmp_path), 2, "NORMAL", "t")
    new()()  # another conversation's turn opens the store's connection
    store = turns._opened[-1][2]
    conversation = new()

    def traced() -> list[str]:
        seen: list[str] = []
        store._conn.set_trace_callback(seen.append)
        conversation()
        store._conn.set_trace_callback(None)
        return [" ".join(statement.split()[:3]) for statement in seen]

    def transactions(heads: list[str]) -> tuple[list[list[str]], list[str]]:
        """Each write transaction's writes, and the statements made outside any.

        A write's statement comes once, however many rows it has (``executemany`` traces
        each row); the reads inside a transaction are its append's checks.
        """
        made: list[list[str]] = []
        outside: list[str] = []
        current: list[str] | None = None
        for head in heads:
            if head == "BEGIN IMMEDIATE":
                current = []
            elif head == "COMMIT":
                assert current is not None
                made.append(current)
                current = None
            elif current is None:
                outside.append(head)
            elif head.startswith(("INSERT", "DELETE", "UPDATE")) and current[-1:] != [head]:
                current.append(head)
        return made, outside

    lease, events = "INSERT INTO nodestep_leases", "INSERT INTO nodestep_events"
    first, first_reads = transactions(traced())
    later, later_reads = transactions(traced())
    assert first == [[lease, events], [events], [events], [events, "DELETE FROM nodestep_leases"]]
    assert first_reads == []
    assert later == first
    assert later_reads == []


def test_the_w10_report_has_the_store_share_row(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARKS / "run.py"), "--quick", "--only", "W10"]
    done = subprocess.run(
        [*command, "--sides", "nodestep,floor", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = orjson.loads((tmp_path / "latest.json").read_bytes())["results"]
    share = [r for r in rows if r["variant"].startswith("nodestep Agent.step, InMemory")]
    assert len(share) == 1
    small, large = share[0]["figures"]["small"], share[0]["figures"]["large"]
    assert small["runs"] == large["runs"] > 0
    assert share[0]["ratio"] == pytest.approx(large["median_us"] / small["median_us"], rel=1e-2)
    heads = [r for r in rows if r["section"] == "head-to-head"]
    assert [sorted(k for k, v in r["figures"].items() if v) for r in heads] == [
        ["floor", "nodestep"]
    ] * 2  # a side not run has no figures
