"""Helpers for testing code built on nodestep: repeatable ids and clocks, store conformance.

``sequential_ids`` and ``ticking_clock`` make a graph's history the same on every run::

    graph = Graph(Poll, id_factory=sequential_ids(), clock=ticking_clock())

``StateStoreConformance`` is the test suite every ``StateStore`` must pass (it needs
pytest: ``pip install 'nodestep[test]'``); see ``docs/stores.md``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

__all__ = ["sequential_ids", "ticking_clock"]


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
