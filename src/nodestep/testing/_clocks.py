"""Repeatable ids and clocks for tests: counting ids, a ticking clock, a fake time."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

__all__ = ["FakeTime", "sequential_ids", "ticking_clock"]


def sequential_ids(start: int = 1) -> Callable[[], str]:
    """Return an id factory that counts: ``00000000-0000-4000-8000-000000000001``, ...

    The ids have the shape of uuid4 strings, so they pass wherever random ids do. The
    factory is safe to share between threads.

    Args:
        start: The number of the first id.
    """
    counter = itertools.count(start)
    lock = threading.Lock()

    def new_id() -> str:
        with lock:
            n = next(counter)
        return f"00000000-0000-4000-8000-{n:012d}"

    return new_id


def ticking_clock(start: float = 1_700_000_000.0, step: float = 1.0) -> Callable[[], float]:
    """Return a clock that starts at ``start`` and moves ``step`` seconds on each reading.

    Args:
        start: The first reading, in seconds since the epoch.
        step: How far each reading moves on from the one before.
    """
    counter = itertools.count()
    lock = threading.Lock()

    def clock() -> float:
        with lock:
            n = next(counter)
        return start + n * step

    return clock


class FakeTime:
    """A clock and a ``sleep`` that never waits: sleeping moves the clock on instead.

    Pass the object as a graph's ``clock=`` and its ``sleep`` as the graph's ``sleep=``;
    retry waits, retry deadlines and circuit breaker cool-downs then take no real time,
    and ``sleeps`` lists the waits asked for. It is safe to share between threads.

    Args:
        start: The first reading, in seconds since the epoch.
        tick: How far each reading moves the clock on (0: only sleeps and ``advance`` do).

    Attributes:
        sleeps: Every wait asked of ``sleep``, in seconds, in order.
    """

    def __init__(self, start: float = 1_700_000_000.0, tick: float = 0.0) -> None:
        self._now = float(start)
        self._tick = float(tick)
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def __repr__(self) -> str:
        return f"FakeTime(now={self._now!r}, tick={self._tick!r})"

    def __call__(self) -> float:
        with self._lock:
            now = self._now
            self._now += self._tick
        return now

    async def sleep(self, seconds: float) -> None:
        """Record the wait and move the clock on by it, at once."""
        self.advance(seconds)
        with self._lock:
            self.sleeps.append(seconds)

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds``, e.g. past a breaker's cool-down."""
        with self._lock:
            self._now += seconds
