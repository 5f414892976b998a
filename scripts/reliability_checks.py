"""The measurements behind RELIABILITY.md; ``scripts/reliability.py`` runs them and reports.

Each check counts outcomes instead of stopping at the first bad one, so the report can say
how often a promise held. The pytest suite guards the same promises with small counts and
asserts; where it has a helper (a forked child, a history file, the ledger worker of the
one-writer test, the failing nodes of the redaction test) this module imports it rather than
writing it again, so a change there reaches the report too.

Each check takes a ``random.Random`` seeded by the caller (which prints the seed) and the
directory to work in, and returns a ``Section``: its figures as Markdown and its goals.
"""

from __future__ import annotations

import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
for _helpers in ("tests", "tests/store", "tests/engine"):  # the test suite's helpers
    sys.path.insert(0, str(ROOT / _helpers))

from forking import in_child, kill_and_collect  # noqa: E402
from test_damaged_records import counter_graph, write_history  # noqa: E402
from test_one_writer_processes import SCRIPT, start, stored  # noqa: E402
from test_redaction import KEY, S, call_api, call_api_sync, deps  # noqa: E402

from nodestep import END, START, BaseState, Command, Graph, node  # noqa: E402
from nodestep._errors import StateStoreError  # noqa: E402
from nodestep.store import FilesystemStateStore  # noqa: E402
from nodestep.testing import checkpoint, event, seqs  # noqa: E402

THREADS = ("t1", "t2", "t3", "t4")
BATCHES = (1, 3, 1, 2)  # records per append, cycled: some appends are batches


@dataclass
class Goal:
    """One promise: what was measured against what must hold."""

    name: str
    measured: str
    target: str
    met: bool


@dataclass
class Section:
    """One part of the report: a heading, its figures as Markdown, and its goals."""

    title: str
    body: str
    goals: list[Goal] = field(default_factory=list)


def run(fn: Callable[[], Any]) -> Any:
    """Run the coroutine function ``fn`` on a new asyncio loop (no loop runs across a fork)."""
    return anyio.run(fn)


# -- kill -9 --------------------------------------------------------------------------------


def _writer(path: Path, fsync: bool, write_end: int, seed: int) -> int:
    """The child: append to every thread at once until killed; ack each append on the pipe."""
    store = FilesystemStateStore(path, fsync=fsync)
    rng = random.Random(seed)

    async def append_forever(thread: str) -> None:
        last = await store.last_sequence(thread, "main")
        k = 0
        while True:
            n = BATCHES[k % len(BATCHES)]
            text = "x" * rng.choice([10, 10, 200, 3000])  # some appends span pages
            batch = [event(last + i + 1, thread, text=text, end=last + n) for i in range(n)]
            await store.append(thread, "main", batch, after=last)
            last, k = last + n, k + 1
            os.write(write_end, f"{thread} {last}\n".encode())  # only once append returned

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            for thread in THREADS:
                tg.start_soon(append_forever, thread)

    run(go)
    return 0


def _kill_once(path: Path, fsync: bool, rng: random.Random) -> dict[str, int]:
    """Start a writer, SIGKILL it after 1-100 ms; return the last acknowledged seq per thread."""
    read_end, write_end = os.pipe()
    seed = rng.randrange(2**32)

    def child() -> int:
        os.close(read_end)
        return _writer(path, fsync, write_end, seed)

    sys.stdout.flush()
    pid = in_child(child)
    acked: dict[str, int] = {}
    for line in kill_and_collect(pid, read_end, write_end, rng.uniform(0.001, 0.1)):
        thread, seq = line.split()
        acked[thread] = max(acked.get(thread, 0), int(seq))
    return acked


def _recover(path: Path, fsync: bool, kept: dict[str, int], tally: Counter[str]) -> None:
    """Open the file as a new process would, check every thread, then append once more."""
    store = FilesystemStateStore(path, fsync=fsync)
    tally["torn tails cut"] += store.repaired_bytes > 0
    valid = True
    for thread in THREADS:
        records = run(lambda t=thread: store.read(t, "main"))
        got = seqs(records)
        last = len(got)
        whole = not records or records[-1]["values"]["end"] == last
        valid &= got == list(range(1, last + 1)) and whole
        tally["acknowledged records lost"] += max(0, kept.get(thread, 0) - last)
        unacked = {r["values"]["end"] for r in records if r["seq"] > kept.get(thread, 0)}
        tally["max unacknowledged appends present"] = max(
            tally["max unacknowledged appends present"], len(unacked)
        )
        kept[thread] = last
    tally["histories valid after reopen"] += valid
    last = kept["t1"]
    run(lambda: store.append("t1", "main", [event(last + 1, end=last + 1)], after=last))
    kept["t1"] = last + 1
    run(store.aclose)
    tally["next append succeeded"] += path.read_bytes().endswith(b"\n")


def kill_9(rng: random.Random, tmp: Path, runs: int, fsync: bool) -> Counter[str]:
    """SIGKILL a writer ``runs`` times; count what every reopen found."""
    tally: Counter[str] = Counter()
    kept: dict[str, int] = {}
    path = tmp / "kill.jsonl"
    for k in range(runs):
        if k % 20 == 0:  # a new file now and then keeps each reopen's read short
            path = tmp / f"kill-{int(fsync)}-{k}.jsonl"
            FilesystemStateStore(path)
            kept = {}
        acked = _kill_once(path, fsync, rng)
        for thread, seq in acked.items():
            kept[thread] = max(kept.get(thread, 0), seq)
        tally["acknowledged appends"] += len(acked)
        try:
            _recover(path, fsync, kept, tally)
        except Exception as error:  # counted, and the next run starts a new file
            tally[f"reopen failed: {type(error).__name__}: {error}"] += 1
            path = tmp / f"kill-{int(fsync)}-{k}-after-failure.jsonl"
            FilesystemStateStore(path)
            kept = {}
        tally["runs"] += 1
    return tally


# -- cuts at every byte offset ------------------------------------------------------------


def _appends(path: Path, rng: random.Random) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """Append 12 batches to three threads; return each append's end offset, thread, records."""
    store = FilesystemStateStore(path)
    done: list[tuple[int, str, list[dict[str, Any]]]] = []
    for _ in range(12):
        thread = rng.choice(THREADS[:3])
        last = run(lambda t=thread: store.last_sequence(t, "main"))
        n = rng.choice([1, 1, 2, 3])
        batch = [event(last + i + 1, thread, text="é" * rng.choice([1, 30, 120])) for i in range(n)]
        if rng.random() < 0.3:
            batch.append(checkpoint(last + n + 1, thread, n=last + n))
        run(lambda t=thread, b=batch, a=last: store.append(t, "main", b, after=a))
        done.append((path.stat().st_size, thread, batch))
    run(store.aclose)
    return done


def _read_all(store: FilesystemStateStore) -> dict[str, list[dict[str, Any]]]:
    return {t: run(lambda t=t: store.read(t, "main")) for t in THREADS[:3]}


def _cut_is_recovered(image: Path, data: bytes, cut: int, appends: list[Any]) -> bool:
    """Whether ``data[:cut]`` reads as exactly the whole appends before the cut, and repairs."""
    image.write_bytes(data[:cut])
    want: dict[str, list[dict[str, Any]]] = {t: [] for t in THREADS[:3]}
    whole_end = min(end for end, _, _ in appends) if appends else 0
    for end, thread, batch in appends:
        if end <= cut:
            want[thread] += batch
            whole_end = max(whole_end, end)
    reader = FilesystemStateStore(image, read_only=True)
    same = _read_all(reader) == want
    run(reader.aclose)
    untouched = image.read_bytes() == data[:cut]  # a reader never changes the file
    writer = FilesystemStateStore(image)
    repaired = writer.repaired_bytes == cut - whole_end and _read_all(writer) == want
    last = len(want["t1"])
    run(lambda: writer.append("t1", "main", [event(last + 1)], after=last))
    run(writer.aclose)
    again = FilesystemStateStore(image, read_only=True)
    appended = seqs(run(lambda: again.read("t1", "main"))) == list(range(1, last + 2))
    run(again.aclose)
    return same and untouched and repaired and appended


def cuts(rng: random.Random, tmp: Path, last_appends: int) -> Counter[str]:
    """Cut a file at every byte offset of its last ``last_appends`` appends; count recoveries."""
    path = tmp / "cuts.jsonl"
    appends = _appends(path, rng)
    data = path.read_bytes()
    first = appends[-last_appends - 1][0]
    tally: Counter[str] = Counter()
    tally["bytes"] = len(data) - first
    for cut in range(first, len(data) + 1):
        try:
            ok = _cut_is_recovered(tmp / "cut.jsonl", data, cut, appends)
        except Exception as error:
            tally[f"raised {type(error).__name__}"] += 1
            ok = False
        tally["images"] += 1
        tally["recovered"] += ok
    return tally


# -- corruption fuzz ----------------------------------------------------------------------


def _damage(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """Flip one byte to another value, or rename one key by one letter."""
    if rng.random() < 0.5:
        at = rng.randrange(len(data))
        value = rng.choice([b for b in range(256) if b != data[at]])
        return f"byte {at} {data[at]:#04x}->{value:#04x}", data[:at] + bytes([value]) + data[
            at + 1 :
        ]
    spots = [m.start() + 1 for m in re.finditer(rb'"[a-z_]+":', data)]
    at = rng.choice(spots)
    end = data.index(b'"', at)
    return f"key at byte {at}", data[: end - 1] + b"z" + data[end:]


def _outcome(path: Path, want: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """Open a damaged file and read every branch; name what happened."""
    try:
        store = FilesystemStateStore(path)
        try:
            graph = counter_graph(store)
            for (thread, branch), records in want.items():
                got = run(lambda t=thread, b=branch: store.read(t, b))
                if got != records[: len(got)]:
                    return "a different history, read without an error"
                if got:
                    state = run(lambda t=thread, b=branch: graph.get_state(t, branch_id=b))
                    if state.sequence != len(got) + records[0]["seq"] - 1:
                        return "a different state, read without an error"
        finally:
            run(store.aclose)
    except StateStoreError as error:
        named = error.path == str(path) and error.line is not None and error.offset is not None
        if named and (error.line == 1 or f"line {error.line} (byte {error.offset})" in str(error)):
            return "StateStoreError naming file, line and offset"
        return "StateStoreError without file, line or offset"
    except Exception as error:
        return f"raw {type(error).__name__}"
    return "valid prefix"


def corruption(rng: random.Random, tmp: Path, cases: int) -> tuple[Counter[str], list[str]]:
    """Damage a valid file ``cases`` times; count each outcome, keep the bad ones' damage."""
    good = write_history(tmp / "fuzz-source.jsonl")
    source = FilesystemStateStore(tmp / "fuzz-source.jsonl")
    branches = [("t1", "main"), ("t2", "main"), ("t1", "alt")]
    want = {b: run(lambda b=b: source.read(*b)) for b in branches}
    run(source.aclose)
    tally: Counter[str] = Counter()
    bad: list[str] = []
    path = tmp / "fuzz.jsonl"
    for _ in range(cases):
        how, data = _damage(good, rng)
        path.write_bytes(data)
        outcome = _outcome(path, want)
        tally[outcome] += 1
        if outcome not in GOOD_OUTCOMES and len(bad) < 5:
            bad.append(f"{how}: {outcome}")
    return tally, bad


GOOD_OUTCOMES = ("valid prefix", "StateStoreError naming file, line and offset")


# -- processes sharing a thread -----------------------------------------------------------


def processes(tmp: Path, workers: int, runs: int) -> dict[str, Any]:
    """``workers`` processes x ``runs`` keyed runs on one thread, retrying on conflicts."""
    (tmp / "ledger.py").write_text(SCRIPT)
    path = tmp / "ledger.jsonl"
    started = time.perf_counter()
    procs = [start(tmp, "worker", str(path), f"w{w}", str(runs)) for w in range(workers)]
    retries, failed = 0, 0
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode:
            failed += 1
            print(f"worker exit {proc.returncode}:\n{err}", file=sys.stderr)
        else:
            retries += int(re.findall(r'"retries": (\d+)', out)[-1])
    elapsed = time.perf_counter() - started
    ids, seq = stored(path)
    expected = {f"w{w}-{i}" for w in range(workers) for i in range(runs)}
    return {
        "inputs": len(expected),
        "applied": len(set(ids) & expected),
        "lost": len(expected - set(ids)),
        "duplicated": len(ids) - len(set(ids)),
        "seq contiguous": seq == list(range(1, len(seq) + 1)),
        "failed workers": failed,
        "retries": retries,
        "seconds": elapsed,
    }


# -- secrets ------------------------------------------------------------------------------


def secrets(tmp: Path) -> Counter[str]:
    """Fail runs whose context holds a SecretStr; count files that hold the secret's bytes."""
    tally: Counter[str] = Counter()
    for fsync in (False, True):
        for failing in (call_api, call_api_sync):
            folder = tmp / f"secret-{int(fsync)}-{failing.name}"
            folder.mkdir()
            store = FilesystemStateStore(folder / "h.jsonl", fsync=fsync)
            graph = Graph(S, state_store=store).flow(START >> failing, failing >> END)
            try:
                run(lambda g=graph: g.ainvoke({}, thread_id="t", context=deps()))
            except PermissionError as error:
                tally["runs failed with the secret in their error"] += KEY in str(error)
            run(store.aclose)
            files = [p for p in folder.iterdir() if p.is_file()]
            tally["files written"] += len(files)
            tally["files holding the secret"] += sum(KEY.encode() in p.read_bytes() for p in files)
            tally["runs"] += 1
    return tally


# -- cost ---------------------------------------------------------------------------------


class Count(BaseState):
    n: int = 0


def _loop_graph(steps: int, store: FilesystemStateStore) -> Graph[Count]:
    @node(goto=["loop", END])
    def loop(state: Count) -> Command:
        n = state.n + 1
        return Command(update={"n": n}, goto=loop if n < steps else END)

    return Graph(Count, max_steps=2 * steps, state_store=store).flow(START >> loop)


def step_cost(tmp: Path, steps: int, rounds: int, fsync: bool) -> float:
    """Median µs per step of a one-node loop of ``steps`` steps, a fresh file per round."""
    samples = []
    for k in range(rounds + 1):  # the first round warms up
        store = FilesystemStateStore(tmp / f"loop-{int(fsync)}-{k}.jsonl", fsync=fsync)
        graph = _loop_graph(steps, store)
        began = time.perf_counter_ns()
        result = graph.invoke({"n": 0}, thread_id="loop")
        samples.append((time.perf_counter_ns() - began) / 1000 / steps)
        assert result.state.n == steps
        run(store.aclose)
    return statistics.median(samples[1:])


def bare_fsync(tmp: Path, count: int) -> float:
    """Median µs of appending 200 bytes to a file and calling ``os.fsync``: the disk's floor."""
    fd = os.open(tmp / "fsync.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    samples = []
    try:
        for _ in range(count):
            began = time.perf_counter_ns()
            os.write(fd, b"x" * 199 + b"\n")
            os.fsync(fd)
            samples.append((time.perf_counter_ns() - began) / 1000)
    finally:
        os.close(fd)
    return statistics.median(samples)


@node
def _bump(state: Count) -> dict[str, int]:
    return {"n": state.n + 1}


def concurrent_runs(tmp: Path, threads: int, runs: int, rounds: int, fsync: bool) -> float:
    """Median runs per second of ``threads`` threads running ``runs`` one-node runs at once."""
    samples = []
    for k in range(rounds + 1):
        store = FilesystemStateStore(tmp / f"w8-{int(fsync)}-{k}.jsonl", fsync=fsync)
        graph = Graph(Count, state_store=store).flow(START >> _bump, _bump >> END)

        async def thread(t: int, graph: Graph[Count] = graph) -> None:
            for i in range(runs):
                result = await graph.ainvoke({}, thread_id=f"t{t}")
                assert result.state.n == i + 1

        async def everyone() -> None:
            async with anyio.create_task_group() as tg:
                for t in range(threads):
                    tg.start_soon(thread, t)

        began = time.perf_counter()
        run(everyone)
        samples.append(threads * runs / (time.perf_counter() - began))
        run(store.aclose)
    return statistics.median(samples[1:])
