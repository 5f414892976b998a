"""Side-by-side benchmarks: nodestep vs LangGraph, with a plain-Python floor.

    python benchmarks/run.py [--quick] [--only W1,W4] [--sides nodestep,langgraph,floor]

Everything runs in this one process.  Each workload is built the same way on every
side, the sides are run alternately (nodestep, langgraph, floor, nodestep, ...)
after a warm-up, and each figure is the median of the timed repetitions.  Results
go to benchmarks/results/latest.md and latest.json.  The exit status is non-zero
if any workload raised or returned a wrong result.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import gc
import importlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import environment  # noqa: E402
import harness  # noqa: E402
import report  # noqa: E402
from harness import (  # noqa: E402
    GET_STATE_CALLS,
    AsyncDriver,
    Budget,
    Stats,
    Timed,
    chat_messages,
    measure,
)
from report import HEAD, SCALING, STORAGE, Row, Target, ratio  # noqa: E402

ALL_WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "DB")
ALL_SIDES = ("nodestep", "langgraph", "floor")

CHAIN_LEN = 100
FAN_WIDTH = 50
LOOP_STEPS = 1000
W6_SMALL, W6_LARGE = 100, 100_000
W7_SMALL, W7_LARGE = 10, 1000
W7_STEPS_SHORT, W7_STEPS_LONG = 50, 250  # whole-run figure from the 50-step run
W8_THREADS, W8_RUNS = 100, 10
W9_ROUNDS = 10  # tool rounds per agent run: 2 * 10 + 1 node steps
W10_TURNS = 3  # turns of a W10 conversation, each: model, tool, model
W10_NEAR, W10_FAR = 20, 200  # the turns whose cost W10's flatness rows compare
W10_REPS = 10  # turns timed at each of them: turns 20-29 and 200-209

TARGETS = {
    "W1": Target(">=", 7),
    "W2": Target(">=", 8),
    "W3": Target(">=", 6),
    "W4": Target(">=", 10),
    "W5": Target(">=", 10),
    "W6": Target("<=", 1.5),
    "W7": Target("<=", 2),
    "W8": Target(">=", 10),
    "W9": Target(">=", 5),
    "W10": Target(">=", 10),
    "W10 flat": Target("<=", 1.5),
    "bytes": Target("<=", 200),
}


@dataclass
class Ctx:
    budget: Budget
    driver: AsyncDriver
    tmpdir: str
    sides: tuple[str, ...]
    mods: dict[str, ModuleType]
    rows: list[Row] = field(default_factory=list)
    durability: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def has(self, side: str) -> bool:
        return side in self.mods

    def each(self, build: Callable[[str, ModuleType], Any]) -> dict[str, Any]:
        """Call ``build(side, module)`` for every selected side, in the fixed order."""
        return {s: build(s, self.mods[s]) for s in ALL_SIDES if s in self.mods}

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print("  " + _console_line(row), flush=True)


def _console_line(row: Row) -> str:
    figs = ", ".join(
        f"{k}={report.median(v):.2f}"
        for k, v in row.figures.items()
        if report.median(v) is not None
    )
    r = "" if row.ratio is None else f"  ratio={row.ratio:.2f}"
    t = "" if row.target is None else f" (target {row.target}: {'met' if row.met else 'NOT met'})"
    return f"{row.workload} {row.variant} [{row.unit}]: {figs}{r}{t}"


def head_row(
    ctx: Ctx,
    workload: str,
    variant: str,
    unit: str,
    stats: dict[str, Stats],
    *,
    ns: str = "nodestep",
    lg: str = "langgraph",
    floor: str | None = "floor",
    target: Target | None = None,
    note: str = "",
) -> None:
    figs: dict[str, Stats | float | None] = {
        "nodestep": stats.get(ns),
        "langgraph": stats.get(lg),
        "floor": stats.get(floor) if floor else None,
    }
    ctx.add(
        Row(
            HEAD,
            workload,
            variant,
            unit,
            figs,
            ratio=ratio(figs["langgraph"], figs["nodestep"]),
            ratio_of="langgraph / nodestep",
            target=target,
            note=note,
        )
    )


# ---------------------------------------------------------------------------- workloads


def w1_w2(ctx: Ctx, workload: str) -> None:
    store = workload == "W2"
    built = ctx.each(lambda s, m: m.chain(CHAIN_LEN, ctx.driver, memory_store=store))
    label = "in-memory store + thread id" if store else "no store"
    for mode, call in (("sync", "invoke"), ("async", "ainvoke")):
        stats = measure(
            {s: b[mode] for s, b in built.items()}, budget=ctx.budget, divisor=CHAIN_LEN
        )
        head_row(
            ctx,
            workload,
            f"chain of {CHAIN_LEN}, {label}, `{call}`",
            "µs per node step",
            stats,
            target=TARGETS[workload],
        )


def w3(ctx: Ctx) -> None:
    w3_rows(ctx, f"fan-out 1 → {FAN_WIDTH} → join", joined=False)
    # The same work with a join barrier: static edges to the 50 and ``[p0, ...] >> join``
    # (LangGraph: 50 ``add_edge``s and one waiting ``add_edge([...], "join")``).
    w3_rows(
        ctx, f"fan-out 1 → {FAN_WIDTH} → join barrier `[p0..p{FAN_WIDTH - 1}] >> join`", joined=True
    )


def w3_rows(ctx: Ctx, what: str, *, joined: bool) -> None:
    built = ctx.each(lambda s, m: m.fanout(FAN_WIDTH, ctx.driver, joined))
    runs = FAN_WIDTH + 2
    for mode, desc in (("sync", "sync nodes, `invoke`"), ("async", "async nodes, `ainvoke`")):
        stats = measure({s: b[mode] for s, b in built.items()}, budget=ctx.budget, divisor=runs)
        head_row(
            ctx,
            "W3",
            f"{what}, {desc}",
            f"µs per node run ({runs} per invoke)",
            stats,
            target=TARGETS["W3"],
        )


def w4(ctx: Ctx) -> None:
    cases: dict[str, Timed] = {}
    loops: dict[str, Any] = {}
    if ctx.has("nodestep"):
        ns = ctx.mods["nodestep"]
        loops["ns"] = ns.durable_loop(LOOP_STEPS, ctx.tmpdir, ctx.driver)
        ctx.durability["nodestep W4/W5/W7"] = loops["ns"].settings
        if ns.has_fsync_option():
            loops["ns_fsync"] = ns.durable_loop(LOOP_STEPS, ctx.tmpdir, ctx.driver, fsync=True)
            ctx.durability["nodestep W4 (fsync row)"] = loops["ns_fsync"].settings
        else:
            ctx.notes.append("FilesystemStateStore has no `fsync` parameter: fsync row skipped")
    if ctx.has("langgraph"):
        lg = ctx.mods["langgraph"]
        loops["lg"] = lg.durable_loop(LOOP_STEPS, ctx.tmpdir)
        ctx.durability["LangGraph SqliteSaver W4/W5/W7"] = (
            f"{loops['lg'].settings} (as SqliteSaver sets it up; SQLite's default synchronous)"
        )
        loops["lg_normal"] = lg.durable_loop(
            LOOP_STEPS, ctx.tmpdir, synchronous="NORMAL", tag="normal"
        )
        ctx.durability["LangGraph SqliteSaver W4 (NORMAL row)"] = (
            f"{loops['lg_normal'].settings} (set by the benchmark: no fsync per commit)"
        )
    for k, v in loops.items():
        cases[k] = v.run
    if ctx.has("floor"):
        fl = ctx.mods["floor"]
        cases["floor_io"] = fl.durable_loop(LOOP_STEPS, ctx.tmpdir, fsync=False)
        cases["floor_fsync"] = fl.durable_loop(LOOP_STEPS, ctx.tmpdir, fsync=True)
    stats = measure(cases, budget=ctx.budget, divisor=LOOP_STEPS)
    unit = "µs per step"
    desc = f"loop ×{LOOP_STEPS}, `invoke`"
    head_row(
        ctx,
        "W4",
        f"{desc}; file store (default) vs SqliteSaver (default)",
        unit,
        stats,
        ns="ns",
        lg="lg",
        floor="floor_io",
        target=TARGETS["W4"],
        note="as each library ships; floor = orjson line + write + flush per step",
    )
    if "ns_fsync" in stats or not ctx.has("nodestep"):
        head_row(
            ctx,
            "W4",
            f"{desc}; file store fsync=True vs SqliteSaver (default)",
            unit,
            stats,
            ns="ns_fsync",
            lg="lg",
            floor="floor_fsync",
            target=TARGETS["W4"],
            note="both sides durable against power loss; floor adds os.fsync per step",
        )
    head_row(
        ctx,
        "W4",
        f"{desc}; file store (default) vs SqliteSaver synchronous=NORMAL",
        unit,
        stats,
        ns="ns",
        lg="lg_normal",
        floor="floor_io",
        target=TARGETS["W4"],
        note="neither side fsyncs per step",
    )

    # bytes stored per step, from the files the last timed runs left behind
    if "ns" in loops:
        size = os.path.getsize(loops["ns"].last_path[0])
        ctx.add(
            Row(
                STORAGE,
                "W4",
                "nodestep FilesystemStateStore, one-int state",
                "bytes per step",
                {"bytes": float(size)},
                ratio=size / LOOP_STEPS,
                target=TARGETS["bytes"],
                note=f"{size} bytes after a {LOOP_STEPS}-step thread (includes the input record)",
            )
        )
    if "lg" in loops:
        size = loops["lg"].stored_bytes()
        ctx.add(
            Row(
                STORAGE,
                "W4",
                "LangGraph SqliteSaver, one-int state (reference)",
                "bytes per step",
                {"bytes": float(size)},
                ratio=size / LOOP_STEPS,
                note=f"{size} bytes (database after a WAL checkpoint), {LOOP_STEPS}-step thread",
            )
        )


def w5(ctx: Ctx) -> None:
    cases: dict[str, Timed] = {}
    divisors: dict[str, int] = {}
    ns_path = os.path.join(ctx.tmpdir, "w5-nodestep.jsonl")
    for side in ("nodestep", "langgraph"):
        if not ctx.has(side):
            continue
        mod = ctx.mods[side]
        if side == "nodestep":
            ops = mod.history_reads(LOOP_STEPS, ns_path, ctx.driver)
        else:
            ops = mod.history_reads(LOOP_STEPS, os.path.join(ctx.tmpdir, "w5-lg.sqlite"))
        for op, fn in ops.items():
            cases[f"{side}|{op}"] = fn
            divisors[f"{side}|{op}"] = GET_STATE_CALLS if op == "get_state" else 1
    if ctx.has("floor") and os.path.exists(ns_path):
        cases["floor|history"] = ctx.mods["floor"].read_jsonl(ns_path)["history"]
        divisors["floor|history"] = 1
    stats = measure(cases, budget=ctx.budget, divisor=divisors)
    for op, desc in (
        ("history", "full history"),
        ("get_state", "`get_state` (latest)"),
        ("history_cold", "full history, store opened per call"),
        ("get_state_cold", "`get_state`, store opened per call"),
    ):
        head_row(
            ctx,
            "W5",
            f"{desc}, {LOOP_STEPS}-step thread, file store vs SQLite",
            "µs per call",
            stats,
            ns=f"nodestep|{op}",
            lg=f"langgraph|{op}",
            floor=f"floor|{op}",
            # The target is about a store in use; a cold call also opens and indexes the file.
            target=None if op.endswith("cold") else TARGETS["W5"],
            note=(
                "floor = read the nodestep file and orjson-parse every line"
                if op == "history"
                else (
                    "cold = new store object / new sqlite3 connection each call; for "
                    "information, no target: opening a file store indexes the whole file once"
                    if op.endswith("cold")
                    else ""
                )
            ),
        )


def w6(ctx: Ctx) -> None:
    if not ctx.has("nodestep"):
        ctx.notes.append("W6 skipped: nodestep side not selected")
        return
    ns = ctx.mods["nodestep"]
    stores: dict[str, tuple[str, str, int, float]] = {}
    for label, want in (("small", W6_SMALL), ("large", W6_LARGE)):
        path = os.path.join(ctx.tmpdir, f"w6-{label}.jsonl")
        tid, events, build_s = ns.build_store(path, want, ctx.driver)
        stores[label] = (path, tid, events, build_s)
        print(f"  W6 built {label} store: {events} events in {build_s:.1f} s", flush=True)
    ops: dict[str, dict[str, Timed]] = {}
    seq: dict[str, Callable[[], int]] = {}
    for label, (p, tid, _, _) in stores.items():
        ops[label], seq[label] = ns.big_store_ops(p, tid, ctx.driver)
    seq_before = {k: f() for k, f in seq.items()}
    stats: dict[str, Stats] = {}
    # Separate groups: reads first, then writes with few rounds so the small thread stays
    # near its size; warm and cold apart, because a cold open of the large file
    # allocates its whole index, which would disturb warm figures measured around it.
    groups = (
        ("get_state warm",),
        ("get_state cold",),
        ("append (ainvoke) warm", "update_state warm"),
        ("append (ainvoke) cold",),
    )
    for group in groups:
        cases = {f"{label}|{op}": ops[label][op] for label in ops for op in group}
        divisors = {k: (GET_STATE_CALLS if k.endswith("get_state warm") else 1) for k in cases}
        b = ctx.budget
        if not group[0].startswith("get_state"):
            b = dataclasses.replace(b, max_reps=min(b.max_reps, 25))
        stats.update(measure(cases, budget=b, divisor=divisors))
    seq_after = {k: f() for k, f in seq.items()}
    ev_s, ev_l = stores["small"][2], stores["large"][2]
    for op in ops["small"]:
        s, lg = stats[f"small|{op}"], stats[f"large|{op}"]
        ctx.add(
            Row(
                SCALING,
                "W6",
                f"nodestep {op}, one thread of {ev_s:,} vs {ev_l:,} events",
                "µs per call",
                {"small": s, "large": lg},
                ratio=ratio(lg, s),
                ratio_of="large / small",
                # Per-call cost of a store in use; a cold call also indexes the whole file.
                target=None if op.endswith("cold") else TARGETS["W6"],
                note=(
                    "warm = one store object kept open; cold = a new store object per call. "
                    f"The appends grow the threads: last sequence {seq_before['small']:,} → "
                    f"{seq_after['small']:,} (small), {seq_before['large']:,} → "
                    f"{seq_after['large']:,} (large) over the whole workload"
                    if op == "get_state warm"
                    else ""
                ),
                extra={
                    "events": {"small": ev_s, "large": ev_l},
                    "last_sequence_before": seq_before,
                    "last_sequence_after": seq_after,
                    "build_seconds": {k: round(v[3], 2) for k, v in stores.items()},
                },
            )
        )


def _w7_marginal(stats: dict[str, Stats], side: str, hist: int) -> float | None:
    """Per-step cost with fixed per-run costs removed: (long run - short run) / extra steps."""
    a = stats.get(f"{side}|{hist}|{W7_STEPS_LONG}")
    b = stats.get(f"{side}|{hist}|{W7_STEPS_SHORT}")
    if a is None or b is None:
        return None
    return (a.median_us - b.median_us) / (W7_STEPS_LONG - W7_STEPS_SHORT)


def _w7_whole(stats: dict[str, Stats], side: str, hist: int) -> float | None:
    a = stats.get(f"{side}|{hist}|{W7_STEPS_SHORT}")
    return None if a is None else a.median_us / W7_STEPS_SHORT


def w7(ctx: Ctx) -> None:
    for store in (False, True):
        cases: dict[str, Timed] = {}
        for side in ALL_SIDES:
            if not ctx.has(side) or (store and side == "floor"):
                continue
            mod = ctx.mods[side]
            for hist in (W7_SMALL, W7_LARGE):
                msgs = chat_messages(hist)
                for steps in (W7_STEPS_SHORT, W7_STEPS_LONG):
                    key = f"{side}|{hist}|{steps}"
                    if side == "floor":
                        cases[key] = mod.chat(hist, steps, msgs)
                    else:
                        cases[key] = mod.chat(
                            hist, steps, ctx.tmpdir if store else None, msgs, ctx.driver
                        )
        stats = measure(cases, budget=ctx.budget)
        where = "file store / SQLite" if store else "no store"
        span = W7_STEPS_LONG - W7_STEPS_SHORT

        marginal = functools.partial(_w7_marginal, stats)
        whole = functools.partial(_w7_whole, stats)

        for side in ALL_SIDES:
            if f"{side}|{W7_SMALL}|{W7_STEPS_SHORT}" not in stats:
                continue
            name = {"nodestep": "nodestep", "langgraph": "LangGraph", "floor": "Python floor"}
            for kind, fn in (("marginal", marginal), ("whole run", whole)):
                small, large = fn(side, W7_SMALL), fn(side, W7_LARGE)
                ctx.add(
                    Row(
                        SCALING,
                        "W7",
                        f"{name[side]}, {where}, {W7_LARGE} vs {W7_SMALL} messages, {kind}",
                        "µs per step",
                        {"small": small, "large": large},
                        ratio=ratio(large, small),
                        ratio_of="large / small",
                        target=TARGETS["W7"] if side != "floor" else None,
                        note=(
                            f"marginal = (run of {W7_STEPS_LONG} steps − run of "
                            f"{W7_STEPS_SHORT}) / {span}: fixed per-run costs cancel"
                            if kind == "marginal" and side == "nodestep" and not store
                            else (
                                f"whole run = run of {W7_STEPS_SHORT} steps / {W7_STEPS_SHORT}"
                                if kind == "whole run" and side == "nodestep" and not store
                                else ""
                            )
                        ),
                    )
                )
        if ctx.has("nodestep") and ctx.has("langgraph"):
            ns_m, lg_m = marginal("nodestep", W7_LARGE), marginal("langgraph", W7_LARGE)
            ctx.add(
                Row(
                    HEAD,
                    "W7",
                    f"chat, {W7_LARGE} messages, {where}, marginal step",
                    "µs per step",
                    {
                        "nodestep": ns_m,
                        "langgraph": lg_m,
                        "floor": marginal("floor", W7_LARGE) if not store else None,
                    },
                    ratio=ratio(lg_m, ns_m),
                    ratio_of="langgraph / nodestep",
                )
            )


# ---------------------------------------------------------------------------- main


def w8(ctx: Ctx) -> None:
    runs = W8_THREADS * W8_RUNS
    cases: dict[str, Timed] = {}
    if ctx.has("nodestep"):
        ns = ctx.mods["nodestep"]
        cases["nodestep"] = ns.concurrent_runs(W8_THREADS, W8_RUNS, ctx.tmpdir, ctx.driver)
        ctx.durability["nodestep W8"] = (
            "FilesystemStateStore(path, fsync=True): each run on the disk when ainvoke "
            "returns; concurrent appends share flushes"
        )
    if ctx.has("langgraph"):
        lg = ctx.mods["langgraph"]
        cases["langgraph"] = lg.concurrent_runs(W8_THREADS, W8_RUNS, ctx.tmpdir, ctx.driver)
        ctx.durability["LangGraph AsyncSqliteSaver W8"] = (
            "journal_mode=WAL, synchronous=FULL (set by the benchmark): a flush per commit"
        )
    stats = measure(cases, budget=ctx.budget, divisor=runs)
    head_row(
        ctx,
        "W8",
        f"{W8_THREADS} threads at once × {W8_RUNS} one-node runs each, `ainvoke`, durable "
        f"against power loss: file store fsync=True vs AsyncSqliteSaver synchronous=FULL",
        "µs per run",
        stats,
        floor=None,
        target=TARGETS["W8"],
        note="runs per second = 1,000,000 / figure; a sample is all "
        f"{runs} runs on a fresh file / database",
    )


def w7_typed(ctx: Ctx) -> None:
    """W7 again on nodestep, with typed messages and add_messages, a node reading them."""
    if not ctx.has("nodestep"):
        return
    import workloads_agents as agents

    for store in (False, True):
        cases: dict[str, Timed] = {}
        for hist in (W7_SMALL, W7_LARGE):
            for steps in (W7_STEPS_SHORT, W7_STEPS_LONG):
                where_to = ctx.tmpdir if store else None
                run = agents.nodestep_typed_chat(hist, steps, where_to, ctx.driver)
                cases[f"nodestep|{hist}|{steps}"] = run
        stats = measure(cases, budget=ctx.budget)
        where = "file store" if store else "no store"
        for kind, fn in (("marginal", _w7_marginal), ("whole run", _w7_whole)):
            small, large = fn(stats, "nodestep", W7_SMALL), fn(stats, "nodestep", W7_LARGE)
            ctx.add(
                Row(
                    SCALING,
                    "W7",
                    f"nodestep typed messages (add_messages), {where}, {W7_LARGE} vs "
                    f"{W7_SMALL} messages, {kind}",
                    "µs per step",
                    {"small": small, "large": large},
                    ratio=ratio(large, small),
                    ratio_of="large / small",
                    target=TARGETS["W7"] if kind == "marginal" else None,
                    note=(
                        "each step reads state.messages and appends an AssistantMessage; "
                        "whole run includes validating the input conversation once"
                        if kind == "whole run" and not store
                        else ""
                    ),
                )
            )


def w9(ctx: Ctx) -> None:
    import workloads_agents as agents

    built: dict[str, dict[str, Timed]] = {}
    if ctx.has("nodestep"):
        built["nodestep"] = agents.nodestep_agent(W9_ROUNDS, ctx.driver)
    if ctx.has("langgraph"):
        built["langgraph"] = agents.langgraph_agent(W9_ROUNDS, ctx.driver)
    steps = 2 * W9_ROUNDS + 1
    for mode, call in (("sync", "invoke"), ("async", "ainvoke")):
        cases = {side: b[mode] for side, b in built.items()}
        if ctx.has("floor"):
            cases["floor"] = agents.floor_agent(W9_ROUNDS)
        stats = measure(cases, budget=ctx.budget, divisor=steps)
        head_row(
            ctx,
            "W9",
            f"ReAct agent, scripted model, {W9_ROUNDS} tool rounds + answer, no store, `{call}`",
            f"µs per node step ({steps} per run)",
            stats,
            target=TARGETS["W9"],
            note="create_react_agent on both sides: nodestep ScriptedModel vs langchain_core "
            "FakeMessagesListChatModel; one tool call per round",
        )


def w10(ctx: Ctx) -> None:
    """W10: an agent's turns on SQLite; 3-turn conversations, then turn 200 against turn 20."""
    import workloads_agent_turns as turns

    far = W10_FAR + W10_REPS
    try:
        for sync, label in (("FULL", "both synchronous=FULL"), ("NORMAL", "both NORMAL")):
            makers: dict[str, Callable[[], Callable[[], int]]] = {}
            if ctx.has("nodestep"):
                makers["nodestep"] = turns.nodestep_conversations(
                    ctx.tmpdir, far, sync, f"ns-{sync}"
                )
            if ctx.has("langgraph"):
                makers["langgraph"] = turns.langgraph_conversations(
                    ctx.tmpdir, far, sync, f"lg-{sync}"
                )
            if ctx.has("floor"):
                makers["floor"] = turns.floor_conversations(ctx.tmpdir, far, sync, f"fl-{sync}")
            cases = {side: turns.three_turns(new) for side, new in makers.items()}
            stats = measure(cases, budget=ctx.budget, divisor=W10_TURNS)
            head_row(
                ctx,
                "W10",
                f"specs-folder agent, {W10_TURNS}-turn conversation, one tool call per turn, "
                "scripted model: `await Agent.step` on SQLiteStateStore vs "
                f"`create_react_agent` `invoke` on SqliteSaver, {label}",
                f"µs per turn ({W10_TURNS} per sample)",
                stats,
                target=TARGETS["W10"],
                note="a sample is a new conversation (a new execution_id of one Agent / a new "
                "thread id of one agent) and its 3 turns; each turn: model, tool, model; "
                "floor = the turn hand-written on dicts, one sqlite3 INSERT + COMMIT per "
                "step (FULL: the last one flushes)"
                if sync == "FULL"
                else "neither side flushes to the disk per commit",
            )
            w10_flat(ctx, {side: new for side, new in makers.items() if side != "floor"}, label)
        if ctx.has("nodestep"):
            w10_store_share(ctx)
        ctx.durability["nodestep W10"] = (
            "SQLiteStateStore(path, synchronous='FULL' or its default 'NORMAL'), WAL"
        )
        ctx.durability["LangGraph SqliteSaver W10"] = (
            "WAL, synchronous=FULL (SQLite's default) or NORMAL (set by the benchmark)"
        )
        ctx.durability["Python floor W10"] = (
            "sqlite3, WAL, each step committed before the next; with FULL the turn's last "
            "commit flushes"
        )
    finally:
        turns.close()


def w10_store_share(ctx: Ctx) -> None:
    """nodestep's W10 turn on ``InMemoryStateStore`` against the same on SQLite NORMAL.

    The difference is what the durable store adds to a turn; the rest of it is the
    engine's and the agent's CPU. Measured as the head rows are, the two alternating.
    """
    import workloads_agent_turns as turns

    far = W10_FAR + W10_REPS
    makers = {
        "small": turns.nodestep_conversations(ctx.tmpdir, far, None, "ns-memory"),
        "large": turns.nodestep_conversations(ctx.tmpdir, far, "NORMAL", "ns-share"),
    }
    cases = {store: turns.three_turns(new) for store, new in makers.items()}
    stats = measure(cases, budget=ctx.budget, divisor=W10_TURNS)
    ctx.add(
        Row(
            SCALING,
            "W10",
            "nodestep Agent.step, InMemoryStateStore (small) vs SQLiteStateStore NORMAL "
            "(large): what the durable store adds to a turn",
            f"µs per turn ({W10_TURNS} per sample)",
            stats,
            ratio=ratio(stats["large"], stats["small"]),
            ratio_of="SQLite / memory",
            note="the same 3-turn conversations as the head rows; on SQLite every turn makes "
            "4 write transactions (the lease taken with the run's input, three supersteps, "
            "the last also giving the lease back) and no read; the floor's turn makes 3",
        )
    )


def w10_flat(ctx: Ctx, makers: dict[str, Callable[[], Callable[[], int]]], label: str) -> None:
    """Per-turn cost of one conversation at turn 200 against the same at turn 20.

    Each side walks whole conversations turn after turn, timing every turn, and the
    figures are the medians of turns 20 to 29 and 200 to 209. (Alternating two
    conversations of one agent, as ``measure`` would, times the switch between them too.)
    """
    near_turns = range(W10_NEAR - 1, W10_NEAR - 1 + W10_REPS)
    far_turns = range(W10_FAR - 1, W10_FAR - 1 + W10_REPS)
    walks = 1 if ctx.budget is harness.QUICK else 3
    names = {"nodestep": "nodestep Agent.step", "langgraph": "LangGraph create_react_agent"}
    for side, new in makers.items():
        near: list[int] = []
        far: list[int] = []
        for _ in range(walks):
            conversation = new()
            harness.settle()
            times = [conversation() for _ in range(far_turns[-1] + 1)]
            gc.unfreeze()
            near += [times[i] for i in near_turns]
            far += [times[i] for i in far_turns]
        s_near, s_far = Stats.from_ns(near, 1), Stats.from_ns(far, 1)
        ctx.add(
            Row(
                SCALING,
                "W10",
                f"{names[side]}, SQLite {label}, turn {W10_FAR} vs turn {W10_NEAR} of one "
                "conversation",
                "µs per turn",
                {"small": s_near, "large": s_far},
                ratio=ratio(s_far, s_near),
                ratio_of=f"turn {W10_FAR} / turn {W10_NEAR}",
                target=TARGETS["W10 flat"] if side == "nodestep" else None,
                note=f"medians of turns {W10_NEAR}-{W10_NEAR + W10_REPS - 1} and "
                f"{W10_FAR}-{W10_FAR + W10_REPS - 1}, over {walks} conversation(s) walked "
                "turn after turn"
                if side == "nodestep"
                else "",
            )
        )


def load_sides(sides: tuple[str, ...]) -> dict[str, ModuleType]:
    names = {
        "nodestep": "workloads_nodestep",
        "langgraph": "workloads_langgraph",
        "floor": "workloads_floor",
    }
    mods = {}
    for s in sides:
        try:
            mods[s] = importlib.import_module(names[s])
        except ImportError as e:
            raise SystemExit(
                f"cannot import the {s} side ({e}).\n"
                f"Install it into this environment (nodestep: `pip install -e .`, "
                f"LangGraph: `pip install -e '.[bench]'`) or pass e.g. "
                f"--sides {','.join(x for x in sides if x != s)}"
            ) from e
    return mods


def trace_spans() -> None:
    """Turn nodestep's tracing on, with the OpenTelemetry SDK making every span and a
    processor that drops each one as it ends: the cost of the spans, not of a network."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from nodestep.tracing import enable_tracing

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    enable_tracing(provider)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="few repetitions; well under a minute")
    p.add_argument("--only", default="", help="comma list of workloads, e.g. W1,W4")
    p.add_argument("--sides", default=",".join(ALL_SIDES), help="comma list of sides to run")
    p.add_argument("--out", default=str(HERE / "results"), help="output directory")
    p.add_argument(
        "--tracing",
        action="store_true",
        help="run nodestep with OpenTelemetry spans on (the SDK, spans dropped at export)",
    )
    args = p.parse_args(argv)
    only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    bad = [w for w in only if w not in ALL_WORKLOADS]
    if bad:
        p.error(f"unknown workload(s) {bad}; choose from {', '.join(ALL_WORKLOADS)}")
    sides = tuple(s.strip() for s in args.sides.split(",") if s.strip())
    bad = [s for s in sides if s not in ALL_SIDES]
    if bad:
        p.error(f"unknown side(s) {bad}; choose from {', '.join(ALL_SIDES)}")
    args.only_list = only
    args.sides_tuple = sides
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    budget = harness.QUICK if args.quick else harness.FULL
    mods = load_sides(args.sides_tuple)
    if args.tracing:
        trace_spans()
    workloads = args.only_list or list(ALL_WORKLOADS)
    tmpdir = tempfile.mkdtemp(prefix="nodestep-bench-")
    driver = AsyncDriver()
    ctx = Ctx(budget=budget, driver=driver, tmpdir=tmpdir, sides=args.sides_tuple, mods=mods)
    errors: list[str] = []
    steps: dict[str, Callable[[], None]] = {
        "W1": lambda: w1_w2(ctx, "W1"),
        "W2": lambda: w1_w2(ctx, "W2"),
        "W3": lambda: w3(ctx),
        "W4": lambda: w4(ctx),
        "W5": lambda: w5(ctx),
        "W6": lambda: w6(ctx),
        "W7": lambda: (w7(ctx), w7_typed(ctx)),
        "W8": lambda: w8(ctx),
        "W9": lambda: w9(ctx),
        "W10": lambda: w10(ctx),
        # A chat turn at turn 20 and turn 1,000, every store: benchmarks/workloads_chat.py.
        "W11": lambda: importlib.import_module("workloads_chat").run(ctx, head_row),
        # The database stores against LangGraph's savers: benchmarks/workloads_db.py.
        "DB": lambda: importlib.import_module("workloads_db").run(ctx, head_row),
    }
    machine = environment.machine(tmpdir)
    try:
        for w in workloads:
            print(f"{w} ...", flush=True)
            t0 = time.perf_counter()
            try:
                steps[w]()
            except Exception as e:  # keep going; reported and turned into the exit status
                tb = traceback.format_exc()
                print(tb, file=sys.stderr, flush=True)
                errors.append(f"{w}: {type(e).__name__}: {e}")
            finally:
                if "nodestep" in mods:
                    mods["nodestep"].close_stores(driver)
            print(f"{w} done in {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        driver.close()
        shutil.rmtree(tmpdir, ignore_errors=True)

    machine["load_average_at_end"] = environment.load_average()
    meta = {
        "mode": "quick" if args.quick else "full",
        "tracing": args.tracing,
        "only": args.only_list,
        "sides": list(args.sides_tuple),
        "generated_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "nodestep_git": environment.git_commit(HERE.parent),
        "versions": environment.versions(),
        "machine": machine,
        "durability": ctx.durability,
        "targets": {k: str(v) for k, v in TARGETS.items()},
        "method": [
            "one process; the sides of a workload run alternately (nodestep, langgraph, "
            "floor, nodestep, ...) after "
            f"{budget.warmup} warm-up round(s); figures are medians of "
            f"{budget.min_reps}–{budget.max_reps} timed rounds (count chosen from the "
            f"warm-up time, about {budget.seconds:g} s per group); quartiles and run "
            "counts are in latest.json",
            "time.perf_counter_ns around the invoke/ainvoke/read call only; graph "
            "building, fresh thread ids and fresh database files are set up outside "
            "the timed interval; async calls are timed inside one long-lived event loop",
            "garbage collection stays enabled during timed runs, identically for all "
            "sides; before each workload survivors are collected and frozen (gc.freeze) "
            "and a gc.collect() runs before each round; the side that runs first in a "
            "round (right after the collection) moves on by one each round",
            "LangGraph state schemas are TypedDict (its default and fastest kind); "
            "nodestep state schemas are BaseState (pydantic) classes",
            "W2 uses one in-memory store per side and a fresh thread id per run",
            "W4 and W7 with a store use a fresh file / database per run; W5 reads a "
            f"{LOOP_STEPS}-step thread built once per side",
            "all files live in a tempfile.mkdtemp() directory removed at the end",
            *ctx.notes,
        ],
        "errors": errors,
    }
    md, js = report.write(ctx.rows, meta, args.out)
    print(f"wrote {md} and {js} ({meta['wall_seconds']} s)")
    if errors:
        print(f"{len(errors)} workload(s) failed:", *errors, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
