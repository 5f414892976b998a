"""History files of format versions 1 and 2, written by earlier releases, and version 3.

``tests/data/history_v1.jsonl`` was written by nodestep 0.1 (format 1) running the graphs of
``tests/data/v1_graphs.py``; ``history_v1_expected.json`` holds what that release reported
for it (see ``tests/data/make_history_v1.py``, which writes both). This release must report
the same, go on with the threads left unfinished, and set the header's version to 3 at its
first write, so that older releases refuse the file instead of misreading new lines.
``tests/data/history_v2.jsonl`` is that file after the release that wrote format 2 went on
with the unfinished threads (``tests/data/make_history_v2.py``): lines of both formats,
none with a checksum.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import orjson
import pytest

import nodestep
from nodestep import FilesystemStateStore, Graph, Resume
from nodestep._errors import StateStoreError
from nodestep.store import _codec
from nodestep.store._file import io as _io

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURE = DATA / "history_v1.jsonl"
FIXTURE_V2 = DATA / "history_v2.jsonl"
EXPECTED: dict[str, Any] = json.loads((DATA / "history_v1_expected.json").read_text())
V1_HEADER = b'{"type":"header","format":"nodestep-history","version":1,"created":1.5}\n'


def _import_graphs() -> ModuleType:
    # tests/data is no package of the test tree: import the module from its file.
    spec = importlib.util.spec_from_file_location("v1_graphs", DATA / "v1_graphs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["v1_graphs"] = module  # pydantic resolves the state classes' annotations here
    spec.loader.exec_module(module)
    return module


v1_graphs = _import_graphs()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A copy of the version 1 fixture, which tests may change."""
    copy = tmp_path / "history.jsonl"
    shutil.copyfile(FIXTURE, copy)
    return copy


@pytest.fixture(autouse=True)
def no_faults_left() -> Iterator[None]:
    yield
    _io.faults = None


def header(path: Path) -> dict[str, Any]:
    first: dict[str, Any] = orjson.loads(path.read_bytes().split(b"\n", 1)[0])
    return first


def graphs_on(store: FilesystemStateStore) -> dict[str, Graph[Any]]:
    return {name: v1_graphs.build(name, store) for name in v1_graphs.GRAPHS}


def snapshot_of(snapshot: Any) -> dict[str, Any]:
    """The fields of a ``StateSnapshot`` the expected file records."""
    return {
        "sequence": snapshot.sequence,
        "event_id": snapshot.event_id,
        "status": snapshot.status,
        "next": list(snapshot.next),
        "interrupts": {
            key: {"id": i.id, "node": i.node, "task_id": i.task_id, "payload": i.payload}
            for key, i in snapshot.interrupts.items()
        },
    }


def reports_as(now: dict[str, Any], then: dict[str, Any]) -> bool:
    """Tell whether this release's snapshot says what the previous release's said.

    Three rules changed since: a superstep whose run failed is ``"failed"`` (it was
    ``"running"``); ``next`` leaves out the tasks that finished in the pending superstep
    (it listed every task), so it is an ordered part of the previous ``next``; and
    ``interrupts`` are those ``resume=`` takes, so a superstep that a resume answered shows
    none (it listed them until the superstep completed), and a paused one all of them.
    """
    status = now["status"]
    if status == "failed" and then["status"] == "running":
        status = "running"
    left = iter(then["next"])
    in_order = all(task in left for task in now["next"])
    shown, listed = now["interrupts"], then["interrupts"]
    interrupts = shown == listed if status == "paused" else shown.items() <= listed.items()
    changed = ("status", "next", "interrupts")
    rest = {k: v for k, v in now.items() if k not in changed}
    return (
        in_order
        and interrupts
        and status == then["status"]
        and rest == {k: v for k, v in then.items() if k not in changed}
    )


def without_event(snapshot: dict[str, Any]) -> dict[str, Any]:
    # Records written by this release get random ids, not the fixture's injected ones.
    return {k: v for k, v in snapshot.items() if k != "event_id"}


async def check_reads_as_expected(
    graphs: dict[str, Graph[Any]], changed: frozenset[str] = frozenset()
) -> None:
    """Check every thread and branch against what the previous release reported.

    Threads in ``changed`` were continued since: their final state is the one the previous
    release reached by continuing them, and their old events read as before.
    """
    for key, want in EXPECTED["threads"].items():
        graph, thread, branch = graphs[want["graph"]], want["thread"], want["branch"]
        history = await graph.history(thread, branch_id=branch)
        events = [[e.sequence, e.type, e.id] for e in history.events]
        assert events[: len(want["events"])] == want["events"], key
        for event_id, then in want["at"].items():
            assert await graph.load(thread, event_id, branch_id=branch) == then["load"], key
            state = await graph.get_state(thread, event_id, branch_id=branch)
            assert reports_as(snapshot_of(state), then["state"]), (key, event_id)
        now = snapshot_of(await graph.get_state(thread, branch_id=branch))
        if thread in changed:
            want = EXPECTED["continued"][thread]
            assert await graph.load(thread, branch_id=branch) == want["load"], key
            assert reports_as(without_event(now), without_event(want["state"])), key
        else:
            assert len(events) == len(want["events"]), key
            assert await graph.load(thread, branch_id=branch) == want["load"], key
            assert reports_as(now, want["state"]), key


# -- the fixture ---------------------------------------------------------------------------


def test_the_fixture_is_a_version_1_file_of_every_record_shape() -> None:
    lines = [orjson.loads(line) for line in FIXTURE.read_bytes().splitlines()]
    assert lines[0]["version"] == 1
    kinds = {line["type"] for line in lines}
    assert kinds == {
        "header",
        "batch",
        "branch",
        "checkpoint",
        "run_started",
        "task_finished",
        "superstep_completed",
        "run_paused",
        "run_failed",
        "run_stopped",
        "run_completed",
        "state_updated",
    }
    supersteps = [line for line in lines if line["type"] == "superstep_completed"]
    assert all("tasks" not in line for line in supersteps), "format 1 has no 'tasks' key"
    assert any(isinstance(line["routes"], dict) for line in supersteps)  # several tasks
    assert any("replaced" in line for line in supersteps)  # one task, written with Replace
    assert any("send" in str(line["routes"]) for line in supersteps)  # Send routes
    assert any(line.get("caches") for line in lines if line["type"] == "run_paused")
    assert {line.get("reason") for line in lines if line["type"] == "run_stopped"} == {
        "interrupt_before",
        "interrupt_after",
        "stream_closed",
    }
    assert {line["mergeable"] for line in lines if line["type"] == "run_failed"} == {True, False}
    checkpoints = [line["seq"] for line in lines if line.get("thread") == "counter"]
    assert len(checkpoints) > 100  # long enough for checkpoints after 50 records


# -- reading it ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_thread_reads_as_the_previous_release_reported(path: Path) -> None:
    store = FilesystemStateStore(path)
    await check_reads_as_expected(graphs_on(store))
    assert await graphs_on(store)["review"].branches("review-done") != []
    await store.aclose()
    assert path.read_bytes() == FIXTURE.read_bytes()


def test_the_sync_forms_read_as_the_previous_release_reported(path: Path) -> None:
    store = FilesystemStateStore(path)
    graphs = graphs_on(store)
    for key, want in EXPECTED["threads"].items():
        graph, thread, branch = graphs[want["graph"]], want["thread"], want["branch"]
        assert graph.load_sync(thread, branch_id=branch) == want["load"], key
        now = snapshot_of(graph.get_state_sync(thread, branch_id=branch))
        assert reports_as(now, want["state"]), key
        history = graph.history_sync(thread, branch_id=branch)
        assert [[e.sequence, e.type, e.id] for e in history.events] == want["events"], key
        event_id, then = next(iter(want["at"].items()))
        assert graph.load_sync(thread, event_id, branch_id=branch) == then["load"], key
    anyio.run(store.aclose)
    assert path.read_bytes() == FIXTURE.read_bytes()


@pytest.mark.anyio
async def test_reading_a_version_1_file_writes_nothing_to_it(path: Path) -> None:
    before = path.stat()
    _io.faults = _io.FaultPlan()  # logs every operation
    store = FilesystemStateStore(path)
    graph = graphs_on(store)["review"]
    await graph.load("review-done")
    await graph.get_state("review-paused")
    await graph.history("review-done", branch_id="retry")
    await store.read("counter", "main")
    await store.last_checkpoint("counter", "main")
    await store.locate("chain", EXPECTED["threads"]["chain/main"]["events"][0][2])
    await store.list_branches("review-done")
    await store.aclose()
    ops = {op for op, _, _ in _io.faults.log}
    assert ops.isdisjoint({"write", "pwrite", "truncate", "fsync"}), ops
    assert path.read_bytes() == FIXTURE.read_bytes()
    assert path.stat().st_mtime_ns == before.st_mtime_ns


# -- going on with it ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_paused_failed_and_stopped_threads_go_on_and_the_file_becomes_version_3(
    path: Path,
) -> None:
    store = FilesystemStateStore(path)
    graphs = graphs_on(store)
    for thread, how in EXPECTED["resume"].items():
        graph = graphs[v1_graphs.THREADS[thread]]
        if "resume" in how:
            result = await graph.ainvoke(None, thread_id=thread, resume=Resume(how["resume"]))
        elif "answers" in how:
            answers = Resume(answers=how["answers"])
            result = await graph.ainvoke(None, thread_id=thread, resume=answers)
        else:  # a failed or stopped superstep: continue it
            result = await graph.ainvoke(None, thread_id=thread)
        assert result.status == EXPECTED["continued"][thread]["status"], thread
        assert result.state.model_dump() == EXPECTED["continued"][thread]["load"], thread
    await store.aclose()

    assert header(path)["version"] == 3
    old, new = FIXTURE.read_bytes(), path.read_bytes()
    offset = _codec.VERSION_OFFSET
    assert new[: len(old)] == old[:offset] + b"3" + old[offset + 1 :], "only the version changed"

    again = FilesystemStateStore(path)  # a new store reads the whole file again
    await check_reads_as_expected(graphs_on(again), frozenset(EXPECTED["resume"]))
    await again.aclose()


def test_the_first_write_sets_the_version_first_and_flushes_it(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(V1_HEADER)
    store = FilesystemStateStore(path, fsync=True)
    _io.faults = _io.FaultPlan()
    anyio.run(lambda: store.append("t1", "main", [event(1)], after=0))
    ops = [(op, offset, size) for op, offset, size in _io.faults.log if op != "stat"]
    pwrite = ops.index(("pwrite", _codec.VERSION_OFFSET, 1))
    write = next(i for i, (op, _, _) in enumerate(ops) if op == "write")
    assert pwrite < write
    assert "fsync" in [op for op, _, _ in ops[pwrite:write]], "the new header is not flushed"
    assert path.read_bytes().startswith(V1_HEADER.replace(b'"version":1', b'"version":3'))
    _io.faults = _io.FaultPlan()
    anyio.run(lambda: store.append("t1", "main", [event(2)], after=1))
    assert "pwrite" not in [op for op, _, _ in _io.faults.log], "upgraded twice"
    anyio.run(store.aclose)


def test_a_store_that_read_the_file_as_version_1_writes_after_another_upgraded_it(
    path: Path,
) -> None:
    first, second = FilesystemStateStore(path), FilesystemStateStore(path)
    anyio.run(lambda: second.read("chain", "main"))  # indexed while the header said 1
    anyio.run(lambda: first.append("chain", "main", [event(19, "chain")], after=18))
    _io.faults = _io.FaultPlan()
    anyio.run(lambda: second.append("chain", "main", [event(20, "chain")], after=19))
    assert "pwrite" not in [op for op, _, _ in _io.faults.log], "upgraded twice"
    _io.faults = None
    assert header(path)["version"] == 3
    seqs = [r["seq"] for r in anyio.run(lambda: first.read("chain", "main", start=18))]
    assert seqs == [18, 19, 20]
    anyio.run(first.aclose)
    anyio.run(second.aclose)


def test_a_failed_append_after_the_upgrade_leaves_a_valid_version_3_file(path: Path) -> None:
    store = FilesystemStateStore(path)
    _io.faults = _io.FaultPlan(fail_op="write")
    with pytest.raises(StateStoreError, match="Nothing was stored"):
        anyio.run(lambda: store.append("chain", "main", [event(19, "chain")], after=18))
    _io.faults = None
    anyio.run(store.aclose)
    assert header(path)["version"] == 3
    old = FIXTURE.read_bytes()
    offset = _codec.VERSION_OFFSET
    assert path.read_bytes() == old[:offset] + b"3" + old[offset + 1 :]


_CRASH_AFTER_UPGRADE = """
import sys, time, anyio
from nodestep.store._file import io as _io
from nodestep.store import FilesystemStateStore
store = FilesystemStateStore(sys.argv[1], fsync=True)
record = {"id": "new-1", "seq": 19, "ts": time.time(), "thread": "chain", "branch": "main",
          "type": "state_updated", "values": {"note": "lost"}}
_io.faults = _io.FaultPlan(fail_op="write", crash=True)  # killed as the append writes
anyio.run(lambda: store.append("chain", "main", [record], after=18))
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the crash is a SIGKILL")
def test_a_crash_between_the_upgrade_and_the_append_leaves_a_valid_file(path: Path) -> None:
    src = str(Path(nodestep.__file__).resolve().parents[1])
    child = [sys.executable, "-c", _CRASH_AFTER_UPGRADE, str(path)]
    done = subprocess.run(child, env={**os.environ, "PYTHONPATH": src}, timeout=30)
    assert done.returncode == -signal.SIGKILL
    assert header(path)["version"] == 3
    store = FilesystemStateStore(path)
    assert store.repaired_bytes == 0
    anyio.run(lambda: check_reads_as_expected(graphs_on(store)))
    anyio.run(lambda: store.append("chain", "main", [event(19, "chain")], after=18))
    anyio.run(store.aclose)


def test_a_header_nodestep_did_not_write_is_read_but_not_upgraded(tmp_path: Path) -> None:
    # The same header with its keys in another order: valid, but the version is elsewhere.
    path = tmp_path / "history.jsonl"
    content = b'{"format":"nodestep-history","type":"header","version":1,"created":1.5}\n'
    path.write_bytes(content)
    store = FilesystemStateStore(path)
    assert anyio.run(lambda: store.read("t1", "main")) == []
    with pytest.raises(StateStoreError, match="does not start as nodestep writes one") as info:
        anyio.run(lambda: store.append("t1", "main", [event(1)], after=0))
    assert (info.value.path, info.value.line, info.value.offset) == (str(path), 1, 0)
    anyio.run(store.aclose)
    assert path.read_bytes() == content


def test_a_version_1_header_cut_while_written_is_written_again_as_version_3(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(V1_HEADER[:50])
    store = FilesystemStateStore(path)
    anyio.run(store.aclose)
    assert header(path)["version"] == 3
    assert store.repaired_bytes == 50


def test_a_new_file_is_version_3() -> None:
    line = _codec.header_line(1.5)
    assert orjson.loads(line)["version"] == _codec.VERSION == 3
    assert line[_codec.VERSION_OFFSET : _codec.VERSION_OFFSET + 1] == b"3"


# -- versions this release refuses ---------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "words"),
    [
        (b"5", "format version 5; this nodestep reads versions up to 4. Upgrade nodestep"),
        (b"0", "format version 0, which is not a positive integer"),
        (b"-1", "format version -1, which is not a positive integer"),
        (b"true", "format version True, which is not a positive integer"),
        (b'"2"', "format version '2', which is not a positive integer"),
        (b"-3", "format version -3, which is not a positive integer"),
        (b"2.0", "format version 2.0, which is not a positive integer"),
    ],
)
def test_a_header_of_an_unknown_version_is_refused(
    tmp_path: Path, version: bytes, words: str
) -> None:
    path = tmp_path / "history.jsonl"
    content = b'{"type":"header","format":"nodestep-history","version":' + version
    content += b',"created":1.5}\n' + FIXTURE.read_bytes().split(b"\n", 1)[1]
    path.write_bytes(content)
    with pytest.raises(StateStoreError, match=words) as info:
        FilesystemStateStore(path)
    assert str(path) in str(info.value)
    assert (info.value.path, info.value.line, info.value.offset) == (str(path), 1, 0)
    assert path.read_bytes() == content


def event(seq: int, thread: str = "t1") -> dict[str, Any]:
    """Return a history record of ``thread``'s main branch."""
    return {
        "id": f"{thread}-{seq}",
        "seq": seq,
        "ts": 1.5,
        "thread": thread,
        "branch": "main",
        "type": "state_updated",
        "values": {"note": f"n{seq}"},
    }


# -- version 2 -----------------------------------------------------------------------------


@pytest.fixture
def path_v2(tmp_path: Path) -> Path:
    """A copy of the version 2 fixture, which tests may change."""
    copy = tmp_path / "history.jsonl"
    shutil.copyfile(FIXTURE_V2, copy)
    return copy


def test_the_version_2_fixture_has_lines_of_both_older_formats_and_no_checksum() -> None:
    data = FIXTURE_V2.read_bytes()
    assert header(FIXTURE_V2)["version"] == 2
    assert data.startswith(FIXTURE.read_bytes()[: _codec.VERSION_OFFSET])
    assert b'"tasks":{' in data[len(FIXTURE.read_bytes()) :], "format 2 supersteps"
    assert b', "c":"' not in data


@pytest.mark.anyio
async def test_a_version_2_file_reads_as_the_release_that_wrote_it_left_it(path_v2: Path) -> None:
    store = FilesystemStateStore(path_v2)
    await check_reads_as_expected(graphs_on(store), frozenset(EXPECTED["resume"]))
    await store.aclose()
    assert path_v2.read_bytes() == FIXTURE_V2.read_bytes()


@pytest.mark.anyio
async def test_writing_to_a_version_2_file_sets_version_3_and_checksums_only_new_lines(
    path_v2: Path,
) -> None:
    old = FIXTURE_V2.read_bytes()
    store = FilesystemStateStore(path_v2)
    await store.append("fresh", "main", [event(1, "fresh"), event(2, "fresh")], after=0)
    await store.aclose()
    new = path_v2.read_bytes()
    offset = _codec.VERSION_OFFSET
    assert new[: len(old)] == old[:offset] + b"3" + old[offset + 1 :], "only the version changed"
    added = new[len(old) :].splitlines()
    assert len(added) == 3 and all(line.endswith(b'"}') and b', "c":"' in line for line in added)
    again = FilesystemStateStore(path_v2)
    assert await again.read("fresh", "main") == [event(1, "fresh"), event(2, "fresh")]
    await check_reads_as_expected(graphs_on(again), frozenset(EXPECTED["resume"]))
    await again.aclose()
