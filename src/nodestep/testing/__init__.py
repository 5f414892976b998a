"""Helpers for testing code built on nodestep: repeatable ids and clocks, store conformance.

``sequential_ids`` and ``ticking_clock`` make a graph's history the same on every run::

    graph = Graph(Poll, id_factory=sequential_ids(), clock=ticking_clock())

``FakeTime`` is a clock whose ``sleep`` never waits, for retry and breaker tests::

    fake = FakeTime()
    graph = Graph(Poll, clock=fake, sleep=fake.sleep)

``StateStoreConformance`` is the test suite every ``StateStore`` must pass; see
``docs/stores.md``. It needs pytest (``pip install 'nodestep[test]'``), so this module
imports it only when the name is first used: importing ``nodestep.testing`` for the other
helpers needs nothing but nodestep (``from nodestep.testing import *`` imports the suite
too). ``event``, ``checkpoint``, ``events``, ``fork`` and ``seqs`` build history records as
the engine would, for a store's own tests.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from nodestep._public import publish
from nodestep.testing._records import checkpoint, event, events, fork, seqs

if TYPE_CHECKING:
    from nodestep.testing._conformance import StateStoreConformance

__all__ = [
    "FakeTime",
    "StateStoreConformance",
    "checkpoint",
    "event",
    "events",
    "fork",
    "seqs",
    "sequential_ids",
    "ticking_clock",
]


def __getattr__(name: str) -> object:
    # Imported on first use, so that only the suite, not the helpers above, needs pytest.
    if name == "StateStoreConformance":
        from nodestep.testing._conformance import StateStoreConformance

        publish(__name__, [name], {name: StateStoreConformance})
        return StateStoreConformance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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


publish(__name__, [n for n in __all__ if n != "StateStoreConformance"], globals())
