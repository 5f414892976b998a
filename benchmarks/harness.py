"""Timing machinery shared by every workload.

A *timed callable* takes no argument, performs one complete run of a workload and
returns the elapsed wall time in nanoseconds (``time.perf_counter_ns``).  Doing the
timing inside the callable lets a workload keep its per-run setup (a fresh thread
id, a fresh database file) outside the measured interval.

``measure`` runs several timed callables alternately -- A, B, C, A, B, C, ... --
after a warm-up, and summarises each one by its median.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Timed = Callable[[], int]

now_ns = time.perf_counter_ns

GET_STATE_CALLS = 200
"""``get_state`` calls per timed sample, on either side. A sample runs right after the other
workloads of its group (LangGraph's history read, a cold store open), so its first calls
meet cold CPU caches. With 200 calls a sample takes about 0.6 ms for nodestep and 6 ms for
LangGraph, and the median is the steady cost of a call. With 20 calls per sample both
medians were about a third higher (nodestep 4.0 µs, LangGraph 42 µs, against 2.8 and 31)."""


class AsyncDriver:
    """One event loop for the whole benchmark process.

    Async workloads are timed *inside* the loop, so the cost of entering and
    leaving the loop is not part of any figure.
    """

    def __init__(self) -> None:
        self._runner = asyncio.Runner()

    def run(self, coro: Awaitable[Any]) -> Any:
        return self._runner.run(coro)  # type: ignore[arg-type]

    def timed(self, make: Callable[[], Awaitable[Any]], repeat: int = 1) -> int:
        """Time ``repeat`` sequential awaits of ``make()`` inside the loop."""

        async def body() -> int:
            t0 = now_ns()
            for _ in range(repeat):
                await make()
            return now_ns() - t0

        return self._runner.run(body())

    def close(self) -> None:
        self._runner.close()


def time_sync(fn: Callable[[], Any], repeat: int = 1) -> int:
    t0 = now_ns()
    for _ in range(repeat):
        fn()
    return now_ns() - t0


@dataclass(frozen=True)
class Stats:
    """Summary of one timed callable, already divided into the reported unit."""

    median_us: float
    min_us: float
    p25_us: float
    p75_us: float
    runs: int
    divisor: int

    @classmethod
    def from_ns(cls, samples: list[int], divisor: int) -> Stats:
        xs = sorted(s / divisor / 1000.0 for s in samples)
        if len(xs) >= 4:
            q = statistics.quantiles(xs, n=4)
            p25, p75 = q[0], q[2]
        else:
            p25, p75 = xs[0], xs[-1]
        return cls(
            median_us=statistics.median(xs),
            min_us=xs[0],
            p25_us=p25,
            p75_us=p75,
            runs=len(xs),
            divisor=divisor,
        )

    def as_dict(self) -> dict[str, float | int]:
        return {
            "median_us": round(self.median_us, 3),
            "min_us": round(self.min_us, 3),
            "p25_us": round(self.p25_us, 3),
            "p75_us": round(self.p75_us, 3),
            "runs": self.runs,
            "divisor": self.divisor,
        }


@dataclass(frozen=True)
class Budget:
    """How long to spend on one group of alternating callables."""

    warmup: int
    min_reps: int
    max_reps: int
    seconds: float


QUICK = Budget(warmup=1, min_reps=3, max_reps=25, seconds=0.35)
FULL = Budget(warmup=3, min_reps=7, max_reps=150, seconds=3.0)


def settle() -> None:
    """Collect garbage and freeze what survives, so long-lived objects (imported
    modules, built graphs) are not rescanned by collections during timed runs.
    Applied identically for every side; GC stays enabled while timing."""
    gc.collect()
    gc.freeze()


def rotated(names: list[str], start: int) -> list[str]:
    """``names`` in order, starting from the one at ``start`` (modulo their number)."""
    first = start % len(names) if names else 0
    return names[first:] + names[:first]


def measure(
    cases: dict[str, Timed],
    *,
    budget: Budget,
    divisor: int | dict[str, int] = 1,
) -> dict[str, Stats]:
    """Warm up, then run the callables round-robin and return median statistics.

    The number of repetitions is derived from the warm-up timings so that the
    whole group takes roughly ``budget.seconds``, bounded by ``min_reps`` and
    ``max_reps``. Each round starts with a ``gc.collect()`` and then runs every callable
    once, starting one further along the list each round: the callable that runs first
    after the collection meets emptied free lists and cold caches (on W10's agent turn,
    up to 1 ms more), and every side takes that place equally often.
    """
    names = list(cases)
    settle()
    warm_ns = 0
    for _ in range(max(budget.warmup, 1)):
        for name in names:
            warm_ns += cases[name]()
    per_round = warm_ns / max(budget.warmup, 1) / 1e9
    reps = int(budget.seconds / per_round) if per_round > 0 else budget.max_reps
    reps = max(budget.min_reps, min(budget.max_reps, reps))

    samples: dict[str, list[int]] = {n: [] for n in names}
    for rep in range(reps):
        gc.collect()
        for name in rotated(names, rep):
            samples[name].append(cases[name]())
    gc.unfreeze()

    def div(name: str) -> int:
        return divisor[name] if isinstance(divisor, dict) else divisor

    return {n: Stats.from_ns(samples[n], div(n)) for n in names}


def chat_messages(count: int) -> list[dict[str, str]]:
    """The W7 conversation: ``count`` alternating user/assistant messages."""
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"message number {i}: " + "lorem ipsum " * 4}
        for i in range(count)
    ]
