"""Model-based test: each memory store agrees with a dict after any sequence of operations.

A hypothesis state machine drives one store with random puts (some with a TTL), deletes,
gets, searches with filters and pages, namespace listings, sweeps, clock moves and (for the
stores that keep their items) reopening. A plain dict of ``(namespace, key)`` to value and
expiry is the model; every answer of the store must be the model's. Reads here never
refresh a TTL, so the model's expiry times stay what the puts set.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from memory_backends import OPENERS, PERSISTENT, drop_schema

from nodestep.memory import MemoryStore
from nodestep.testing import FakeTime

NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("x", "a_b")]
KEYS = ["k1", "k2", "k/3", "k.4"]
VALUES = st.fixed_dictionaries(
    {"n": st.integers(-3, 3)},
    optional={"s": st.sampled_from(["p", "q", "r"]), "flag": st.booleans()},
)
FILTERS = st.sampled_from(
    [
        None,
        {"n": 1},
        {"n": {"$gt": 0}},
        {"n": {"$lte": 0, "$ne": -1}},
        {"s": "q"},
        {"flag": True},
        {"s": {"$in": ["p", "r"]}},
        {"s": {"$nin": ["p"]}},
    ]
)


def _matches(value: dict[str, Any], flt: dict[str, Any] | None) -> bool:
    """The model's own reading of the few filters above, independent of ``filters``."""
    if not flt:
        return True
    ((field, cond),) = flt.items()
    got = value.get(field)
    if not isinstance(cond, dict):
        return field in value and got == cond and type(got) is type(cond)
    checks = {
        "$gt": lambda: got is not None and got > cond["$gt"],
        "$lte": lambda: got is not None and got <= cond["$lte"],
        "$ne": lambda: got != cond["$ne"],
        "$in": lambda: got in cond["$in"],
        "$nin": lambda: got not in cond["$nin"],
    }
    return all(checks[op]() for op in cond)


class MemoryMachine(RuleBasedStateMachine):
    kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="memory-machine-"))
        self.clock = FakeTime(1_000.0)
        self.opened: list[MemoryStore] = []
        self.store = self._open()
        self.model: dict[tuple[tuple[str, ...], str], tuple[dict[str, Any], float | None]] = {}

    def _open(self) -> MemoryStore:
        store = OPENERS[self.kind](self.folder, clock=self.clock, refresh_ttl=False)
        self.opened.append(store)
        return store

    def _live(self) -> dict[tuple[tuple[str, ...], str], dict[str, Any]]:
        now = self.clock()
        return {k: v for k, (v, exp) in self.model.items() if exp is None or exp > now}

    @rule(
        ns=st.sampled_from(NAMESPACES),
        key=st.sampled_from(KEYS),
        value=VALUES,
        ttl=st.sampled_from([None, None, 5.0, 20.0]),
    )
    def put(self, ns: tuple[str, ...], key: str, value: dict[str, Any], ttl: float | None):
        self.store.put_sync(ns, key, value, ttl=ttl)
        self.model[(ns, key)] = (value, None if ttl is None else self.clock() + ttl)

    @rule(ns=st.sampled_from(NAMESPACES), key=st.sampled_from(KEYS))
    def delete(self, ns: tuple[str, ...], key: str) -> None:
        existed = (ns, key) in self._live()
        assert self.store.delete_sync(ns, key) is existed
        self.model.pop((ns, key), None)

    @rule(ns=st.sampled_from(NAMESPACES), key=st.sampled_from(KEYS))
    def get(self, ns: tuple[str, ...], key: str) -> None:
        item = self.store.get_sync(ns, key)
        expected = self._live().get((ns, key))
        assert (item.value if item else None) == expected

    @rule(
        prefix=st.sampled_from([(), ("a",), ("a", "b"), ("ab",), ("x",)]),
        flt=FILTERS,
        limit=st.integers(0, 6),
        offset=st.integers(0, 4),
    )
    def search(self, prefix: tuple[str, ...], flt: Any, limit: int, offset: int) -> None:
        found = self.store.search_sync(prefix, filter=flt, limit=limit, offset=offset)
        expected = sorted(
            (ns, key)
            for (ns, key), value in self._live().items()
            if ns[: len(prefix)] == prefix and _matches(value, flt)
        )[offset : offset + limit]
        assert [(i.namespace, i.key) for i in found] == expected

    @rule(depth=st.sampled_from([None, 1, 2]))
    def list_namespaces(self, depth: int | None) -> None:
        expected = sorted({ns if depth is None else ns[:depth] for ns, _ in self._live()})
        assert self.store.list_namespaces_sync(max_depth=depth) == expected

    @rule(seconds=st.sampled_from([1.0, 5.0, 15.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def sweep(self) -> None:
        expired = len(self.model) - len(self._live())
        assert self.store.sweep_sync() == expired
        self.model = {k: v for k, v in self.model.items() if k in self._live()}

    @rule()
    def reopen(self) -> None:
        if self.kind in PERSISTENT:
            self.store.close()
            self.store = self._open()

    @invariant()
    def counts_agree(self) -> None:
        assert len(self.store.search_sync(limit=1000)) == len(self._live())

    def teardown(self) -> None:
        for store in self.opened:
            store.close()
        if self.kind == "postgres":
            drop_schema(self.opened[0])


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(OPENERS))
def test_each_memory_store_agrees_with_a_dict_model(kind: str) -> None:
    if kind == "postgres":
        from postgres_server import require_postgres

        require_postgres()
    machine = type(f"{kind}Machine", (MemoryMachine,), {"kind": kind})
    examples = 25 if kind == "postgres" else 40
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples, stateful_step_count=30, deadline=None),
    )
