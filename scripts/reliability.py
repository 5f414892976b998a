"""Measure how reliably nodestep's file store keeps history, and write RELIABILITY.md.

    python scripts/reliability.py            full counts (a few minutes; ``nox -s reliability``)
    python scripts/reliability.py --quick    small counts, well under a minute
    python scripts/reliability.py --out R.md --seed 1234

Every figure is measured on this machine by this run (see ``reliability_checks``). The
counts can also be set one by one through environment variables, named in ``COUNTS``
(``NODESTEP_CRASHES`` is the one the crash tests read too); ``NODESTEP_SEED`` or ``--seed``
repeats a run. Each randomized check prints its seed. The script exits with status 1 when
any goal is missed, after writing the report that says which.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reliability_checks as checks
from reliability_checks import GOOD_OUTCOMES, Goal, Section

import nodestep

ROOT = checks.ROOT

# name: (environment variable, full count, quick count)
COUNTS: dict[str, tuple[str, int, int]] = {
    "crashes": ("NODESTEP_CRASHES", 200, 10),
    "cut_appends": ("NODESTEP_CUT_APPENDS", 6, 1),
    "flips": ("NODESTEP_FLIPS", 10_000, 300),
    "processes": ("NODESTEP_PROCESSES", 4, 2),
    "process_runs": ("NODESTEP_PROCESS_RUNS", 500, 20),
    "steps": ("NODESTEP_STEPS", 1000, 200),
    "rounds": ("NODESTEP_ROUNDS", 5, 2),
    "w8_runs": ("NODESTEP_W8_RUNS", 10, 2),
}

SUITE_TITLE = "Other stores and the workers, in the test suite"
SUITE = ROOT / "scripts" / "reliability_suite.md"
"""The figures of the test suite's checks of the other stores and the workers: appended as
they are, since the tests measure them (each row names the command that reruns it)."""

SECTIONS = (
    'What "acknowledged" means',
    "kill -9 of a writer",
    "A cut at every byte offset",
    "Corruption fuzz",
    "Processes sharing one thread",
    "Secrets never on disk",
    "Cost of each setting",
)


def counts(quick: bool) -> dict[str, int]:
    """The count of each check: its environment variable if set, else the full or quick one."""
    return {
        name: int(os.environ.get(var, quick_n if quick else full))
        for name, (var, full, quick_n) in COUNTS.items()
    }


def environment(seed: int) -> str:
    """The Markdown table of where and when the figures were measured."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " with uncommitted changes"
    tmp = tempfile.gettempdir()
    fs = subprocess.run(["df", "--output=fstype", tmp], capture_output=True, text=True)
    fstype = fs.stdout.split()[-1] if fs.returncode == 0 else "unknown"
    rows = [
        ("date", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")),
        ("nodestep", f"{nodestep.__version__}, commit {commit}"),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("machine", f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"),
        ("files", f"in {tmp}, on {fstype}"),
        ("seed", f"{seed} (`--seed {seed}` repeats every randomized check)"),
    ]
    return "\n".join(["| | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows)])


def table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])


def acknowledged() -> Section:
    body = table(
        ("call returns", "`fsync=False` (default)", "`fsync=True`"),
        [
            (
                "`invoke`, `ainvoke`, a stream's end",
                "every record of the run handed to the OS: survives a killed process, "
                "not a power loss",
                "every record of the run on the disk (completed, paused, failed or stopped)",
            ),
            (
                "a step of a running call",
                "its record in the OS",
                "its record in the OS; on the disk at the latest when the call returns",
            ),
            ("`update_state`, `fork`, `migrate`", "the record in the OS", "the record on the disk"),
            (
                "`store.append(...)`",
                "the records in the OS",
                "the records on the disk, except a run's records before its last one, "
                "flushed with the next append that waits",
            ),
        ],
    )
    text = (
        "An append is *acknowledged* when the call that made it returns. The rule, from "
        "[docs/persistence.md](docs/persistence.md#how-durable-the-file-is):\n\n"
        f"{body}\n\nThe kill -9 check below holds both settings to the first promise; the "
        "power-loss simulation of `tests/store/test_durability_crash.py` holds `fsync=True` "
        "to the second."
    )
    return Section(SECTIONS[0], text)


def kill_section(rng: Callable[[str], random.Random], tmp: Path, n: int) -> Section:
    rows, goals = [], []
    for fsync in (False, True):
        t = checks.kill_9(rng(f"kill -9, fsync={fsync}"), tmp, n, fsync)
        odd = {k: v for k, v in t.items() if k.startswith("reopen failed")}
        rows.append(
            (
                f"`fsync={fsync}`",
                f"{t['runs']}",
                f"{t['acknowledged records lost']}",
                f"{t['max unacknowledged appends present']}",
                f"{t['histories valid after reopen']}/{t['runs']}",
                f"{t['next append succeeded']}/{t['runs']}",
                f"{t['torn tails cut']}",
            )
        )
        ok = t["histories valid after reopen"] == t["next append succeeded"] == n and not odd
        goals += [
            Goal(
                f"kill -9, fsync={fsync}: acknowledged records lost",
                str(t["acknowledged records lost"]),
                "0",
                t["acknowledged records lost"] == 0,
            ),
            Goal(
                f"kill -9, fsync={fsync}: unacknowledged appends present (max per thread)",
                str(t["max unacknowledged appends present"]),
                "≤ 1",
                t["max unacknowledged appends present"] <= 1,
            ),
            Goal(
                f"kill -9, fsync={fsync}: valid and appendable after reopen",
                f"{t['histories valid after reopen']}/{n}",
                f"{n}/{n}",
                ok,
            ),
        ]
        goals[-1].measured += "".join(f"; {k} ×{v}" for k, v in odd.items())
    text = (
        "A forked writer appends to four threads at once (batches of 1-3 records, some "
        "spanning pages) and acknowledges each append on a pipe once `append` returned; "
        "it is killed with SIGKILL after 1-100 ms. A fresh store then opens the file and "
        "reads every thread (a new file every 20 kills).\n\n"
        + table(
            (
                "setting",
                "kills",
                "acknowledged records lost",
                "unacknowledged appends kept (max per thread)",
                "history valid",
                "next append ok",
                "torn tails cut",
            ),
            rows,
        )
    )
    return Section(SECTIONS[1], text, goals)


def cut_section(rng: random.Random, tmp: Path, n: int) -> Section:
    t = checks.cuts(rng, tmp, n)
    errors = {k: v for k, v in t.items() if k.startswith("raised")}
    text = (
        f"Twelve appends to three threads; the file cut at each of the {t['images']} byte "
        f"offsets of its last {n} appends ({t['bytes']} bytes). Each image must open "
        "read-only to exactly the appends that ended before the cut, without the file "
        "changing; a writer must cut the broken end, read the same, and append.\n\n"
        + table(
            ("images", "recovered", "raised"), [(t["images"], t["recovered"], sum(errors.values()))]
        )
    )
    share = 100 * t["recovered"] / t["images"]
    goal = Goal(
        f"cuts in the last {n} appends: opened to a valid prefix",
        f"{t['recovered']}/{t['images']} ({share:.1f}%)",
        "100%",
        t["recovered"] == t["images"],
    )
    return Section(SECTIONS[2], text, [goal])


def fuzz_section(rng: random.Random, tmp: Path, n: int) -> Section:
    t, bad = checks.corruption(rng, tmp, n)
    good = sum(t[o] for o in GOOD_OUTCOMES)
    rows = [(o, v, f"{100 * v / n:.2f}%") for o, v in t.most_common()]
    text = (
        f"{n} damaged copies of a format-3 file (two threads, a fork; every line with its "
        "CRC-32): half of them one byte set to a random other value, half one key renamed. "
        "Each copy is opened and every branch read, and its latest state loaded.\n\n"
        + table(("outcome", "copies", "share"), rows)
    )
    if bad:
        text += "\n\nFirst cases of another outcome:\n\n" + "\n".join(f"- {b}" for b in bad)
    return Section(
        SECTIONS[3],
        text,
        [
            Goal(
                "corruption fuzz: valid prefix or a precise StateStoreError",
                f"{good}/{n} ({100 * good / n:.2f}%)",
                "100%",
                good == n,
            ),
            Goal("corruption fuzz: other outcomes", str(n - good), "0", good == n),
        ],
    )


def process_section(tmp: Path, workers: int, runs: int) -> Section:
    r = checks.processes(tmp, workers, runs)
    text = (
        f"{workers} processes, {runs} runs each, on one thread of one file; each run has a "
        "request key of its own and is retried with it when the thread is busy or changed "
        "(the worker of `tests/engine/test_one_writer_processes.py`).\n\n"
        + table(
            ("inputs", "applied", "lost", "duplicated", "retries", "seq contiguous", "seconds"),
            [
                (
                    r["inputs"],
                    r["applied"],
                    r["lost"],
                    r["duplicated"],
                    r["retries"],
                    r["seq contiguous"],
                    f"{r['seconds']:.1f}",
                )
            ],
        )
    )
    ok = r["lost"] == r["duplicated"] == r["failed workers"] == 0 and r["seq contiguous"]
    return Section(
        SECTIONS[4],
        text,
        [
            Goal(
                f"{workers} processes × {runs} runs: inputs lost / duplicated",
                f"{r['lost']} / {r['duplicated']}",
                "0 / 0",
                ok,
            ),
        ],
    )


def secret_section(tmp: Path) -> Section:
    t = checks.secrets(tmp)
    text = (
        "Runs whose node raises an error holding a `SecretStr` of the run's context (async "
        "and sync nodes, both settings): the caller gets the error as raised; no file the "
        "store wrote holds the secret's bytes.\n\n"
        + table(
            ("failed runs", "files written", "files holding the secret"),
            [(t["runs"], t["files written"], t["files holding the secret"])],
        )
    )
    return Section(
        SECTIONS[5],
        text,
        [
            Goal(
                "secrets: files holding a context secret",
                str(t["files holding the secret"]),
                "0",
                t["files holding the secret"] == 0 and t["runs"] > 0,
            ),
        ],
    )


def cost_section(tmp: Path, c: dict[str, int]) -> Section:
    steps, rounds, w8 = c["steps"], c["rounds"], c["w8_runs"]
    rows = []
    for fsync in (False, True):
        per_step = checks.step_cost(tmp, steps, rounds, fsync)
        per_second = checks.concurrent_runs(tmp, 100, w8, rounds, fsync)
        rows.append((f"`fsync={fsync}`", f"{per_step:.1f}", f"{per_second:,.0f}"))
    floor = checks.bare_fsync(tmp, 200)
    text = (
        f"Median of {rounds} rounds after a warm-up. Loop: one node, {steps} steps, one "
        f"thread, a fresh file per round (like benchmark W4). Concurrent: 100 threads at "
        f"once, {w8} one-node runs each, on one store (like W8). The full benchmarks: "
        "`nox -s bench`.\n\n"
        + table(("setting", "loop, µs per step", "100 concurrent threads, runs/s"), rows)
        + f"\n\nWith `fsync=True` a call flushes once, when it returns, and concurrent "
        f"calls share a flush, so the loop's {steps} steps pay for one flush. A bare "
        f"200-byte append and `fsync` of a file costs {floor:.0f} µs here (median of 200)."
    )
    return Section(SECTIONS[6], text)


def report(env: str, sections: list[Section], command: str, seconds: float) -> str:
    goals = [g for s in sections for g in s.goals]
    missed = sum(not g.met for g in goals)
    summary = table(
        ("check", "measured", "goal", "met"),
        [(g.name, g.measured, g.target, "yes" if g.met else "**NO**") for g in goals],
    )
    parts = [
        "# Reliability of the file store",
        "Measured on one machine by `" + command + f"` in {seconds:.0f} s; regenerate with "
        "`nox -s reliability` (full counts) or `python scripts/reliability.py --quick`. The "
        "test suite checks the same promises with small counts on every CI run "
        "(`tests/store/test_durability_crash.py`, `test_filesystem_processes.py`, "
        "`test_filesystem_faults.py`, `test_damaged_records.py`, "
        "`tests/engine/test_one_writer_processes.py`, `test_redaction.py`).",
        env,
        "## Goals",
        f"{len(goals) - missed} of {len(goals)} goals met.\n\n{summary}",
    ]
    for section in sections:
        parts += [f"## {section.title}", section.body]
    parts += [f"## {SUITE_TITLE}", SUITE.read_text(encoding="utf-8").strip()]
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, a fast run")
    parser.add_argument("--out", type=Path, default=ROOT / "RELIABILITY.md")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    # A torn tail opened read-only is logged as a warning; the checks make thousands on purpose.
    logging.getLogger("nodestep").setLevel(logging.ERROR)
    seed = (
        args.seed
        if args.seed is not None
        else int(os.environ.get("NODESTEP_SEED", time.time_ns() % 2**32))
    )
    print(f"seed: {seed} (pass --seed {seed} to repeat)", flush=True)
    master = random.Random(seed)

    def rng(name: str) -> random.Random:
        sub = master.randrange(2**32)
        print(f"seed of {name}: {sub}", flush=True)
        return random.Random(sub)

    c = counts(args.quick)
    began = time.perf_counter()
    sections: list[Section] = [acknowledged()]
    with tempfile.TemporaryDirectory(prefix="nodestep-reliability-") as tmp_name:
        tmp = Path(tmp_name)
        steps: list[tuple[str, Callable[[Path], Section]]] = [
            ("kill", lambda d: kill_section(rng, d, c["crashes"])),
            ("cuts", lambda d: cut_section(rng("cuts"), d, c["cut_appends"])),
            ("fuzz", lambda d: fuzz_section(rng("corruption fuzz"), d, c["flips"])),
            ("processes", lambda d: process_section(d, c["processes"], c["process_runs"])),
            ("secrets", secret_section),
            ("cost", lambda d: cost_section(d, c)),
        ]
        for name, step in steps:
            started = time.perf_counter()
            (tmp / name).mkdir()
            sections.append(step(tmp / name))
            print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)
    command = "python scripts/reliability.py" + (" --quick" if args.quick else "")
    text = report(environment(seed), sections, command, time.perf_counter() - began)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}", flush=True)
    return exit_status(sections)


def exit_status(sections: list[Section]) -> int:
    """Print every missed goal; return 1 if there is one, else 0."""
    missed = [g for s in sections for g in s.goals if not g.met]
    for goal in missed:
        print(f"goal missed: {goal.name}: {goal.measured} (goal {goal.target})", file=sys.stderr)
    print("goals missed" if missed else "every goal met", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
