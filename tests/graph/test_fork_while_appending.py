"""Fork and time travel while another process keeps appending to the thread (reliability test 16).

Process P runs turn after turn of a counting loop on thread T of one history file, and prints
the state after every superstep with its event id. Meanwhile, three times, process Q forks T
at a random event that P already wrote into a new branch and runs that branch for a few
turns. The test process reads the file throughout and checks that:

* neither P nor Q ever gets ``ThreadConflictError``: they write different branches;
* the file is append-only: every byte read before a fork is still there after everything,
  and T's main-branch lines up to the fork hash the same;
* each branch record names main as its parent and the event forked from; the branch's first
  record is a checkpoint at ``from_sequence + 1`` holding ``load(T, at=from_event)``, and
  the branch run continues from that state;
* running a branch changes nothing of T: no branch step reaches main's records or P's states;
* time travel: ``load(T, at=event)`` equals the state P (or Q) had live at that event, for
  every superstep either of them ran.

The scripts are written to ``tmp_path`` and run with this interpreter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import orjson
import pytest

from store_helpers import open_file, records_sync

pytestmark = pytest.mark.slow

THREAD = "T"
FORKS = 3

FLOWS = '''
import asyncio
import json
import os
import sys
import time
from typing import Annotated, Any

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    ThreadConflictError,
    add,
    node,
    when,
)
from nodestep.store import StateStore


class Counter(BaseState):
    i: int = 0
    goal: int = 0
    tag: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def count(state: Counter) -> dict:
    time.sleep(0.003)  # real time: a little work, so that P and Q interleave in the file
    return {"log": [f"{state.tag}:{state.i}"], "i": state.i + 1}


def counter_graph(store: StateStore) -> Graph:
    return Graph(Counter, state_store=store).flow(
        START >> count, count >> when(lambda s: s.i < s.goal, count, otherwise=END)
    )


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def run_turns(graph: Graph, thread: str, branch: str, more: "Any") -> int:
    """Run 3-step turns while more(turns) is true; say every superstep's state and event."""
    i = asyncio.run(graph.load(thread, branch_id=branch))["i"] if branch != "main" else 0
    turns = 0
    while more(turns):
        try:
            for event in graph.stream(
                {"goal": i + 3, "tag": branch}, thread_id=thread, branch_id=branch,
                stream_mode="values",
            ):
                if event.mode == "values":
                    say(kind="live", branch=branch, id=event.checkpoint_id, run=event.run_id,
                        state=event.data)
                else:
                    i = event.data.state.i
        except ThreadConflictError as error:
            say(kind="conflict", branch=branch, message=str(error))
            sys.exit(3)
        turns += 1
    return turns
'''

WRITER = """
import os
import sys
from fork_flows import *

path, thread, stop, cap = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
graph = counter_graph(FilesystemStateStore(path))
turns = run_turns(graph, thread, "main", lambda n: n < cap and not os.path.exists(stop))
say(kind="done", turns=turns)
"""

FORKER = """
import asyncio
import sys
from fork_flows import *

path, thread, at, name, turns = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
graph = counter_graph(FilesystemStateStore(path))
try:
    record = asyncio.run(graph.fork(thread, from_=at, name=name))
except ThreadConflictError as error:
    say(kind="conflict", branch=name, message=str(error))
    sys.exit(3)
say(kind="fork", id=record.id, thread=record.thread_id, parent=record.parent_id,
    from_event=record.from_event_id, from_seq=record.from_sequence, created=record.created_at)
run_turns(graph, thread, name, lambda n: n < turns)
say(kind="done", turns=turns)
"""


def flows_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import the scripts' graph module here too, so that this process loads the same graph."""
    spec = importlib.util.spec_from_file_location("fork_flows", tmp_path / "fork_flows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fork_flows", module)  # pydantic resolves names there
    spec.loader.exec_module(module)
    return module


def lines_of(path: Path) -> list[dict[str, Any]]:
    """The output lines a script printed (one JSON object each)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main_lines(data: bytes, thread: str, last_seq: int) -> list[bytes]:
    """The lines of ``thread``'s main branch with ``seq <= last_seq`` among whole lines of data.

    The file omits ``"branch"`` on main-branch events, so a line without it is on main.
    """
    out = []
    for line in data.split(b"\n")[:-1]:  # what follows the last newline may be half written
        record = orjson.loads(line)
        if (
            record.get("type") not in ("header", "batch", "branch")
            and "branch" not in record
            and record["thread"] == thread
            and record["seq"] <= last_seq
        ):
            out.append(line)
    return out


def test_fork_and_time_travel_while_another_process_appends_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    (tmp_path / "fork_flows.py").write_text(FLOWS)
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "forker.py").write_text(FORKER)
    history = tmp_path / "history.jsonl"
    stop = tmp_path / "stop"
    flows = flows_module(tmp_path, monkeypatch)
    graph = flows.counter_graph(open_file(history))  # this process's reader
    store = graph.state_store

    p_out, p_err = tmp_path / "p.out", tmp_path / "p.err"
    with p_out.open("w") as out, p_err.open("w") as err:
        writer = subprocess.Popen(
            [sys.executable, str(tmp_path / "writer.py"), str(history), THREAD, str(stop), "2000"],
            cwd=tmp_path,
            stdout=out,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 30
        while sum(line["kind"] == "live" for line in lines_of(p_out)) < 10:
            assert writer.poll() is None, f"P ended early:\n{p_err.read_text()}"
            assert time.monotonic() < deadline, "P wrote too little in 30 s"
            time.sleep(0.01)  # polls P's output file: the states P says it ran through

        forks: list[dict[str, Any]] = []
        for n in range(FORKS):
            name = f"B{n}"
            before = records_sync(store, THREAD)  # whole records, each indexed
            at = rng.choice(before)
            raw = history.read_bytes()
            fork_state = graph.load_sync(THREAD, at=at["id"])
            appended_before = anyio.run(store.last_sequence, THREAD, "main")
            args = [str(history), THREAD, at["id"], name, "4"]  # Q runs 4 turns on the branch
            forker = subprocess.run(
                [sys.executable, str(tmp_path / "forker.py"), *args],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            appended_during = anyio.run(store.last_sequence, THREAD, "main") - appended_before
            assert forker.returncode == 0, f"Q failed:\n{forker.stdout}\n{forker.stderr}"
            q_lines = [json.loads(line) for line in forker.stdout.splitlines()]
            forks.append(
                {
                    "name": name,
                    "at": at,
                    "main": before,
                    "raw": raw,
                    "hash": hashlib.sha256(
                        b"".join(main_lines(raw, THREAD, before[-1]["seq"]))
                    ).digest(),
                    "state": fork_state,
                    "q": q_lines,
                    "appended_during": appended_during,
                }
            )
        assert writer.poll() is None, f"P ended before the forks were done:\n{p_err.read_text()}"
    finally:
        stop.touch()
        try:
            writer.wait(timeout=30)
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    assert writer.returncode == 0, f"P failed:\n{p_out.read_text()}\n{p_err.read_text()}"
    p_lines = lines_of(p_out)
    assert p_lines[-1]["kind"] == "done"
    lines = p_lines + [line for fork in forks for line in fork["q"]]
    assert [line for line in lines if line["kind"] == "conflict"] == []

    final = history.read_bytes()
    main = records_sync(store, THREAD)
    assert [r["seq"] for r in main] == list(range(1, len(main) + 1))
    p_live = [line for line in p_lines if line["kind"] == "live"]
    p_runs = {line["run"] for line in p_live}
    assert {r["run"] for r in main if "run" in r} == p_runs  # only P wrote main
    interleaved = []

    for fork in forks:
        name, at = fork["name"], fork["at"]
        # Append-only: the bytes read before the fork are all still there, unchanged.
        assert final.startswith(fork["raw"])
        last = fork["main"][-1]["seq"]
        digest = hashlib.sha256(b"".join(main_lines(final, THREAD, last))).digest()
        assert digest == fork["hash"]
        assert records_sync(store, THREAD, stop=last) == fork["main"]

        # The branch record and the branch's first record.
        (made,) = [line for line in fork["q"] if line["kind"] == "fork"]
        assert (made["id"], made["thread"], made["parent"]) == (name, THREAD, "main")
        assert (made["from_event"], made["from_seq"]) == (at["id"], at["seq"])
        branch = records_sync(store, THREAD, name)
        assert branch[0]["type"] == "checkpoint"
        assert branch[0]["seq"] == at["seq"] + 1
        assert [r["seq"] for r in branch] == list(range(at["seq"] + 1, at["seq"] + 1 + len(branch)))
        assert graph.load_sync(THREAD, at=branch[0]["id"]) == fork["state"]
        assert branch[0]["values"] == fork["state"]

        # The branch ran on from the fork's state, in its own records only.
        q_live = [line for line in fork["q"] if line["kind"] == "live"]
        assert len(q_live) == 4 * 3
        i, log = fork["state"]["i"], fork["state"]["log"]
        assert q_live[0]["state"]["log"] == [*log, f"{name}:{i}"]
        assert q_live[-1]["state"]["log"] == log + [f"{name}:{k}" for k in range(i, i + 12)]
        assert graph.load_sync(THREAD, branch_id=name) == q_live[-1]["state"]
        assert {r["run"] for r in branch if "run" in r} == {line["run"] for line in q_live}
        for line in q_live:
            assert graph.load_sync(THREAD, at=line["id"]) == line["state"]

        # P went on appending to main while Q wrote its branch.
        assert fork["appended_during"] > 0, "P appended nothing while Q ran"
        window = (branch[0]["ts"], branch[-1]["ts"])
        interleaved.append(sum(window[0] < r["ts"] < window[1] for r in main))

    assert [b.id for b in graph.branches_sync(THREAD)] == [f["name"] for f in forks]
    print(f"P: {len(p_live)} supersteps, main branch {len(main)} records; main records written")
    print(f"while each branch ran: {interleaved}")
    assert sum(interleaved) > 0, "P and Q never wrote the file at the same time"

    # Time travel on main: every superstep P ran, loaded back by its event id.
    for line in p_live:
        assert graph.load_sync(THREAD, at=line["id"]) == line["state"]
        assert all(entry.startswith("main:") for entry in line["state"]["log"])
    assert graph.load_sync(THREAD) == p_live[-1]["state"]
