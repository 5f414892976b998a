"""Helpers for testing code built on nodestep: repeatable ids and clocks, store conformance.

``sequential_ids`` and ``ticking_clock`` make a graph's history the same on every run::

    graph = Graph(Poll, id_factory=sequential_ids(), clock=ticking_clock())

``FakeTime`` is a clock whose ``sleep`` never waits, for retry and breaker tests::

    fake = FakeTime()
    graph = Graph(Poll, clock=fake, sleep=fake.sleep)

``FakeEmbeddings`` embeds texts as bags of words, deterministically, for tests of a memory
store's semantic search; ``MemoryStoreConformance`` is the suite every ``MemoryStore``
must pass (see ``docs/memory.md``), imported on first use as the other suite is.

``StateStoreConformance`` is the test suite every ``StateStore`` must pass; see
``docs/stores.md``. It needs pytest (``pip install 'nodestep[test]'``), so this module
imports it only when the name is first used: importing ``nodestep.testing`` for the other
helpers needs nothing but nodestep (``from nodestep.testing import *`` imports the suite
too). ``event``, ``checkpoint``, ``events``, ``fork`` and ``seqs`` build history records as
the engine would, for a store's own tests.

``replay`` re-runs a stored thread's calls through the current graph and reports the
first event where the new version diverges (see ``docs/provenance.md``)::

    report = await replay(graph, store, "thread-1", recorded=True)
    assert report.clean, report
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from nodestep._public import publish as _publish
from nodestep.testing._clocks import FakeTime, sequential_ids, ticking_clock
from nodestep.testing._divergence import Divergence
from nodestep.testing._embeddings import FakeEmbeddings
from nodestep.testing._records import checkpoint, event, events, fork, seqs
from nodestep.testing._replay import ReplayReport, replay, replay_sync

if _TYPE_CHECKING:
    from nodestep.testing._conformance import StateStoreConformance
    from nodestep.testing._memory_conformance import MemoryStoreConformance

_SUITES = {
    "StateStoreConformance": "nodestep.testing._conformance",
    "MemoryStoreConformance": "nodestep.testing._memory_conformance",
}

__all__ = [
    "Divergence",
    "FakeEmbeddings",
    "FakeTime",
    "MemoryStoreConformance",
    "ReplayReport",
    "StateStoreConformance",
    "checkpoint",
    "event",
    "events",
    "fork",
    "replay",
    "replay_sync",
    "seqs",
    "sequential_ids",
    "ticking_clock",
]


def __getattr__(name: str) -> object:
    # Imported on first use, so that only the suite, not the helpers above, needs pytest.
    if name in _SUITES:
        import importlib

        suite = getattr(importlib.import_module(_SUITES[name]), name)
        _publish(__name__, [name], {name: suite})
        return suite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


_publish(__name__, [n for n in __all__ if n not in _SUITES], globals())
