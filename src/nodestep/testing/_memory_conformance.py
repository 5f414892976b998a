"""The conformance suite every ``MemoryStore`` must pass, for nodestep's stores and yours.

Subclass ``MemoryStoreConformance`` in a test module and give it an ``open_memory_store``
fixture: a function that opens the store under test with the keyword options it is given
(``clock=``, ``ttl=``, ``embeddings=``, ...), each call of one test on the same data, new
and empty for each test; the fixture closes what it opened::

    import pytest

    from nodestep.testing import MemoryStoreConformance


    class TestMyMemory(MemoryStoreConformance):
        @pytest.fixture
        def open_memory_store(self, tmp_path):
            opened = []

            def open_store(**options):
                opened.append(MyMemoryStore(tmp_path / "memory", **options))
                return opened[-1]

            yield open_store
            for store in opened:
                store.close()

A store that keeps nothing once closed sets ``persistent = False``: the test that reopens
the data then checks that a new store starts empty and the closed one still answers.
The tests are ``async def`` tests marked ``pytest.mark.anyio``, as
``StateStoreConformance``'s are. ``InMemoryMemoryStore`` is the verified fake.

This module needs pytest: ``pip install 'nodestep[test]'``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

try:
    import pytest
except ImportError as e:  # pragma: no cover - pytest is installed wherever the tests run
    raise ImportError(
        "nodestep.testing._memory_conformance is a pytest test suite, and pytest is not "
        "installed: pip install 'nodestep[test]'",
        name="pytest",
    ) from e

from nodestep._errors import GraphConfigError
from nodestep._memory.contract import MemoryStore
from nodestep.testing._clocks import FakeTime
from nodestep.testing._embeddings import FakeEmbeddings

__all__ = ["MemoryStoreConformance"]

NS = ("users", "u-1")


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class MemoryStoreConformance:
    """The behaviour every ``MemoryStore`` shares; subclasses give ``open_memory_store``."""

    pytestmark = pytest.mark.anyio
    persistent = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @pytest.fixture
    def open_memory_store(self) -> Any:
        """A function that opens the store under test (see the module's docstring)."""
        raise NotImplementedError("subclass MemoryStoreConformance and give this fixture")

    # -- put, get, delete -----------------------------------------------------------------

    async def test_put_then_get_returns_the_value_and_its_times(
        self, open_memory_store: Any
    ) -> None:
        clock = FakeTime(1_000.0)
        store = open_memory_store(clock=clock)
        await store.put(NS, "prefs", {"theme": "dark", "size": [1, 2.5], "on": True})
        item = await store.get(NS, "prefs")
        assert item is not None
        assert (item.namespace, item.key) == (NS, "prefs")
        assert item.value == {"theme": "dark", "size": [1, 2.5], "on": True}
        assert item.created_at == item.updated_at == _stamp(1_000.0)
        assert await store.get(NS, "other") is None
        assert await store.get(("users", "u-2"), "prefs") is None

    async def test_a_second_put_replaces_the_value_and_keeps_created_at(
        self, open_memory_store: Any
    ) -> None:
        clock = FakeTime(1_000.0)
        store = open_memory_store(clock=clock)
        await store.put(NS, "k", {"v": 1})
        clock.advance(5)
        await store.put(NS, "k", {"w": 2})
        item = await store.get(NS, "k")
        assert item is not None and item.value == {"w": 2}
        assert (item.created_at, item.updated_at) == (_stamp(1_000.0), _stamp(1_005.0))

    async def test_a_value_read_back_is_a_copy(self, open_memory_store: Any) -> None:
        store = open_memory_store()
        value: dict[str, Any] = {"tags": ["a"]}
        await store.put(NS, "k", value)
        value["tags"].append("changed")
        item = await store.get(NS, "k")
        assert item is not None
        item.value["tags"].append("also changed")
        again = await store.get(NS, "k")
        assert again is not None and again.value == {"tags": ["a"]}

    async def test_delete_removes_the_item_and_says_whether_there_was_one(
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        await store.put(NS, "k", {"v": 1})
        assert await store.delete(NS, "k") is True
        assert await store.get(NS, "k") is None
        assert await store.delete(NS, "k") is False

    async def test_keys_and_labels_with_path_and_pattern_characters_stay_apart(
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        keys = ["a/b", "..", "a%b", "a_b", "axb", "ключ", "with space", "x.item", ".hidden"]
        for i, key in enumerate(keys):
            await store.put(("n%", "a_b"), key, {"i": i})
        for i, key in enumerate(keys):
            item = await store.get(("n%", "a_b"), key)
            assert item is not None and item.value == {"i": i}, key
        assert await store.get(("n%", "axb"), "a_b") is None
        found = await store.search(("n%",), limit=100)
        assert sorted(i.key for i in found) == sorted(keys)

    async def test_a_prefix_matches_labels_in_their_exact_case(
        self, open_memory_store: Any
    ) -> None:
        # Labels are compared exactly: a user "ann" never sees the items of "Ann".
        store = open_memory_store()
        await store.put(("users", "ann"), "k", {"v": "lower"})
        await store.put(("users", "Ann"), "k", {"v": "upper"})
        await store.put(("USERS", "ann"), "k", {"v": "shout"})
        found = await store.search(("users", "ann"))
        assert [(i.namespace, i.value) for i in found] == [(("users", "ann"), {"v": "lower"})]
        found = await store.search(("users",))
        assert [i.namespace for i in found] == [("users", "Ann"), ("users", "ann")]
        assert [i.namespace for i in await store.search(("Users",))] == []

    async def test_the_sync_forms_see_what_the_async_methods_wrote(
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        await store.put(NS, "a", {"v": 1})
        store.put_sync(NS, "b", {"v": 2})
        got = store.get_sync(NS, "a")
        assert got is not None and got.value == {"v": 1}
        assert [i.key for i in store.search_sync(NS)] == ["a", "b"]
        assert store.list_namespaces_sync() == [NS]
        assert store.delete_sync(NS, "a") is True
        assert await store.get(NS, "a") is None

    # -- bad input ------------------------------------------------------------------------

    async def test_a_value_that_is_not_json_is_refused_naming_the_key_and_type_and_nothing_is_written(  # noqa: E501
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        await store.put(NS, "k", {"v": "old"})
        bad: list[Any] = [
            {"when": datetime(2026, 1, 1)},
            {"tags": {"a", "b"}},
            {"n": float("nan")},
            {1: "int key"},
            ["not", "an", "object"],
            "text",
        ]
        for value in bad:
            with pytest.raises(GraphConfigError, match=r"key 'k'") as caught:
                await store.put(NS, "k", value)
            assert "JSON" in str(caught.value)
        with pytest.raises(GraphConfigError, match=r"value\['when'\] is of type datetime"):
            store.put_sync(NS, "k", {"when": datetime(2026, 1, 1)})
        item = await store.get(NS, "k")
        assert item is not None and item.value == {"v": "old"}

    async def test_ints_within_64_bits_round_trip_and_bigger_ones_are_refused(
        self, open_memory_store: Any
    ) -> None:
        # Every back end keeps the same ints exactly: the file store's JSON holds no more.
        store = open_memory_store()
        edges = {"low": -(2**63), "high": 2**64 - 1, "list": [2**63, -1]}
        await store.put(NS, "k", edges)
        item = await store.get(NS, "k")
        assert item is not None and item.value == edges
        for big in (2**64, -(2**63) - 1):
            with pytest.raises(GraphConfigError) as caught:
                await store.put(NS, "k", {"ids": [1, big]})
            assert f"value['ids'][1] is the int {big}, beyond 64 bits" in str(caught.value)
            assert "bigger ones as strings" in str(caught.value)
        item = await store.get(NS, "k")
        assert item is not None and item.value == edges

    async def test_bad_namespaces_and_keys_are_refused(self, open_memory_store: Any) -> None:
        store = open_memory_store()
        for ns in [(), ("a", ""), ("a.b",), "users", ("a", 1)]:
            with pytest.raises(GraphConfigError, match="namespace"):
                await store.put(ns, "k", {"v": 1})
        for key in ["", 3, None]:
            with pytest.raises(GraphConfigError, match="key"):
                await store.put(NS, key, {"v": 1})
        with pytest.raises(GraphConfigError, match=r"unknown operator '\$like'"):
            await store.search(NS, filter={"v": {"$like": "x"}})
        with pytest.raises(GraphConfigError, match="limit"):
            await store.search(NS, limit=-1)
        assert await store.list_namespaces() == []

    async def test_a_refresh_ttl_or_clock_of_the_wrong_kind_is_refused(
        self, open_memory_store: Any
    ) -> None:
        # bool("no") is True: a text would turn refreshing on where it says "no".
        with pytest.raises(GraphConfigError, match="refresh_ttl= takes True or False, got str"):
            open_memory_store(refresh_ttl="no")
        with pytest.raises(GraphConfigError, match=r"clock= takes a function .* got int 5"):
            open_memory_store(clock=5)
        clock = FakeTime()
        store = open_memory_store(clock=clock, ttl=10)
        await store.put(NS, "k", {"v": 1})
        with pytest.raises(GraphConfigError, match="refresh_ttl= takes True, False or None"):
            await store.get(NS, "k", refresh_ttl="no")
        with pytest.raises(GraphConfigError, match="refresh_ttl= takes True, False or None"):
            await store.search(NS, refresh_ttl=0)
        with pytest.raises(GraphConfigError, match="got str 'false'"):
            store.get_sync(NS, "k", refresh_ttl="false")
        clock.advance(11)  # nothing above refreshed the item
        assert await store.get(NS, "k") is None

    async def test_text_no_store_can_keep_is_refused_naming_it_and_nothing_is_written(
        self, open_memory_store: Any
    ) -> None:
        # A NUL (PostgreSQL text refuses it) or a lone surrogate (no UTF-8 encodes one):
        # every back end refuses the same names and values, with a GraphConfigError.
        store = open_memory_store()
        await store.put(NS, "k", {"v": "old"})
        for key, shown in [("a\x00b", r"'a\\x00b'.*NUL"), ("a\ud800", r"'a\\ud800'.*surrogate")]:
            with pytest.raises(GraphConfigError, match=f"key {shown}.*Remove"):
                await store.put(NS, key, {"v": 1})
        for label, shown in [("n\x00", "NUL"), ("\udc80", "lone surrogate")]:
            with pytest.raises(GraphConfigError, match=f"label .*{shown}.*Remove"):
                await store.put(("users", label), "k", {"v": 1})
        with pytest.raises(GraphConfigError, match="lone surrogate"):
            await store.search(("users", "\udc80"))
        for value, where in [
            ({"text": "half \ud800"}, r"value\['text'\] is a string"),
            ({"tags": ["ok", "\udfff"]}, r"value\['tags'\]\[1\] is a string"),
            ({"\ud83d": 1}, r"value has the key '\\ud83d'"),
        ]:
            with pytest.raises(GraphConfigError, match=f"key 'k' is not JSON: {where}.*surrogate"):
                await store.put(NS, "k", value)
        await store.put(NS, "nul", {"text": "a\x00b", "emoji": "\U0001f600"})
        item = await store.get(NS, "nul")
        assert item is not None and item.value == {"text": "a\x00b", "emoji": "\U0001f600"}
        item = await store.get(NS, "k")
        assert item is not None and item.value == {"v": "old"}
        assert await store.list_namespaces() == [NS]

    async def test_a_lookup_of_a_name_holding_nul_finds_nothing_and_is_not_refused(
        self, open_memory_store: Any
    ) -> None:
        # An older nodestep wrote such keys and labels to the SQLite and file stores: a
        # lookup takes them, so that those items can be read and deleted, on every store.
        store = open_memory_store()
        await store.put(NS, "k", {"v": 1})
        assert await store.get(NS, "k\x00") is None
        assert store.get_sync(("users", "n\x00"), "k") is None
        assert await store.delete(NS, "k\x00") is False
        assert store.delete_sync(("users", "n\x00"), "k") is False
        assert await store.search(("users", "n\x00")) == []
        assert await store.list_namespaces(prefix=("users", "n\x00")) == []
        item = await store.get(NS, "k")
        assert item is not None and item.value == {"v": 1}

    # -- search ---------------------------------------------------------------------------

    async def _fill(self, store: MemoryStore) -> None:
        rows: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
            (("docs", "a"), "1", {"kind": "note", "stars": 1, "author": {"name": "ann"}}),
            (("docs", "a"), "2", {"kind": "note", "stars": 3, "done": True}),
            (("docs", "b"), "3", {"kind": "todo", "stars": 5, "done": False}),
            (("docs", "b", "deep"), "4", {"kind": "note", "stars": 4.5, "label": "x"}),
            (("docsx",), "5", {"kind": "note", "stars": 9}),
        ]
        for ns, key, value in rows:
            await store.put(ns, key, value)

    async def test_search_finds_a_prefix_and_its_children_in_namespace_then_key_order(
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        await self._fill(store)
        assert [i.key for i in await store.search(("docs",))] == ["1", "2", "3", "4"]
        assert [i.key for i in await store.search(("docs", "b"))] == ["3", "4"]
        assert [i.key for i in await store.search()] == ["1", "2", "3", "4", "5"]
        assert all(i.score is None for i in await store.search())

    @pytest.mark.parametrize(
        ("filter", "keys"),
        [
            ({"kind": "note"}, ["1", "2", "4", "5"]),
            ({"stars": {"$gt": 3}}, ["3", "4", "5"]),
            ({"stars": {"$gte": 3, "$lt": 5}}, ["2", "4"]),
            ({"stars": {"$lte": 1}}, ["1"]),
            ({"stars": {"$eq": 3}}, ["2"]),
            ({"kind": {"$ne": "note"}}, ["3"]),
            ({"done": True}, ["2"]),
            ({"done": 1}, []),
            ({"done": {"$ne": True}}, ["1", "3", "4", "5"]),
            ({"author.name": "ann"}, ["1"]),
            ({"stars": {"$in": [1, 9]}}, ["1", "5"]),
            ({"kind": {"$nin": ["note"]}}, ["3"]),
            ({"kind": "note", "stars": {"$gt": 2}}, ["2", "4", "5"]),
            ({"label": {"$gt": 3}}, []),
        ],
    )
    async def test_search_filters_on_value_fields(
        self, open_memory_store: Any, filter: dict[str, Any], keys: list[str]
    ) -> None:
        store = open_memory_store()
        await self._fill(store)
        assert [i.key for i in await store.search(filter=filter)] == keys

    async def test_search_pages_with_limit_and_offset_in_a_stable_order(
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        for i in range(7):
            await store.put(NS, f"k{i}", {"i": i})
        pages = [await store.search(NS, limit=3, offset=o) for o in (0, 3, 6)]
        assert [[i.key for i in p] for p in pages] == [
            ["k0", "k1", "k2"],
            ["k3", "k4", "k5"],
            ["k6"],
        ]
        assert await store.search(NS, limit=0) == []

    async def test_semantic_search_ranks_by_the_query_and_puts_unindexed_items_last(
        self, open_memory_store: Any
    ) -> None:
        fake = FakeEmbeddings()
        store = open_memory_store(embeddings=fake, index_fields=["text"])
        await store.put(NS, "cats", {"text": "cats purr and sleep all day"})
        await store.put(NS, "rust", {"text": "the borrow checker of rust"})
        await store.put(NS, "plain", {"text": "cats cats cats"}, index=False)
        await store.put(NS, "none", {"other": "no text field"})
        found = await store.search(NS, query="why do cats purr")
        assert [i.key for i in found] == ["cats", "rust", "none", "plain"]
        assert found[0].score == pytest.approx(2 / (6**0.5 * 4**0.5))  # 2 shared words
        assert found[1].score == 0.0
        assert found[2].score is None and found[3].score is None
        assert found[0].to_json()["score"] == found[0].score
        only = store.search_sync(NS, query="rust", filter={"text": {"$ne": "x"}}, limit=1)
        assert [i.key for i in only] == ["rust"]

    async def test_a_query_on_a_store_without_embeddings_is_refused(
        self, open_memory_store: Any
    ) -> None:
        store = open_memory_store()
        with pytest.raises(GraphConfigError, match="no embeddings"):
            await store.search(NS, query="anything")

    # -- namespaces -----------------------------------------------------------------------

    async def test_list_namespaces_by_prefix_suffix_and_depth(self, open_memory_store: Any) -> None:
        store = open_memory_store()
        await self._fill(store)
        assert await store.list_namespaces() == [
            ("docs", "a"), ("docs", "b"), ("docs", "b", "deep"), ("docsx",)
        ]  # fmt: skip
        assert await store.list_namespaces(prefix=("docs",), max_depth=1) == [("docs",)]
        assert await store.list_namespaces(suffix=("b",)) == [("docs", "b")]
        assert await store.list_namespaces(max_depth=2, limit=2, offset=1) == [
            ("docs", "b"), ("docsx",)
        ]  # fmt: skip
        await store.delete(("docsx",), "5")
        assert ("docsx",) not in await store.list_namespaces()

    # -- TTL ------------------------------------------------------------------------------

    async def test_an_expired_item_is_never_returned_and_a_sweep_removes_it(
        self, open_memory_store: Any
    ) -> None:
        clock = FakeTime(1_000.0)
        store = open_memory_store(clock=clock, ttl=60)
        await store.put(NS, "short", {"v": 1}, ttl=10)
        await store.put(NS, "default", {"v": 2})
        await store.put(("keep",), "ever", {"v": 3}, ttl=None)
        clock.advance(10)
        assert await store.get(NS, "short") is None
        assert [i.key for i in await store.search(refresh_ttl=False)] == ["ever", "default"]
        clock.advance(50)
        assert await store.get(NS, "default") is None
        assert await store.list_namespaces() == [("keep",)]
        assert await store.delete(NS, "default") is False
        assert await store.sweep() == 1  # "default" was deleted above; "short" is left
        assert await store.sweep() == 0
        assert [i.key for i in await store.search()] == ["ever"]

    async def test_a_read_refreshes_the_ttl_unless_told_not_to(
        self, open_memory_store: Any
    ) -> None:
        clock = FakeTime(1_000.0)
        store = open_memory_store(clock=clock)
        await store.put(NS, "read", {"v": 1}, ttl=10)
        await store.put(NS, "found", {"v": 2}, ttl=10)
        await store.put(NS, "peeked", {"v": 3}, ttl=10)
        clock.advance(8)
        assert await store.get(NS, "read") is not None
        assert [i.key for i in await store.search(NS, filter={"v": 2})] == ["found"]
        assert await store.get(NS, "peeked", refresh_ttl=False) is not None
        clock.advance(8)
        assert await store.get(NS, "read", refresh_ttl=False) is not None
        assert await store.get(NS, "found", refresh_ttl=False) is not None
        assert await store.get(NS, "peeked") is None

    async def test_a_store_that_does_not_refresh_on_read_lets_items_expire(
        self, open_memory_store: Any
    ) -> None:
        clock = FakeTime(1_000.0)
        store = open_memory_store(clock=clock, ttl=10, refresh_ttl=False)
        await store.put(NS, "k", {"v": 1})
        clock.advance(8)
        assert await store.get(NS, "k") is not None
        clock.advance(8)
        assert await store.get(NS, "k") is None

    async def test_a_put_over_an_expired_item_starts_a_new_item(
        self, open_memory_store: Any
    ) -> None:
        clock = FakeTime(1_000.0)
        store = open_memory_store(clock=clock)
        await store.put(NS, "k", {"v": 1}, ttl=5)
        clock.advance(10)
        await store.put(NS, "k", {"v": 2})
        item = await store.get(NS, "k")
        assert item is not None and item.created_at == _stamp(1_010.0)
        clock.advance(1_000)
        assert await store.get(NS, "k") is not None  # no ttl any more

    # -- durability and concurrency ------------------------------------------------------

    async def test_items_survive_closing_and_reopening_the_store(
        self, open_memory_store: Any
    ) -> None:
        if not self.persistent:
            # A store that keeps nothing once closed: a new one starts empty, and the
            # closed one still answers (with what it held) when it is used again.
            store = open_memory_store()
            await store.put(NS, "k", {"v": 1})
            await store.aclose()
            assert await open_memory_store().get(NS, "k") is None
            store.put_sync(NS, "after", {"v": 2})
            assert [item.key for item in await store.search(NS)] == ["after", "k"]
            return
        store = open_memory_store()
        await store.put(NS, "k", {"v": 1})
        await store.aclose()
        reopened = open_memory_store()
        item = await reopened.get(NS, "k")
        assert item is not None and item.value == {"v": 1}
        store.put_sync(NS, "after", {"v": 2})  # a closed store opens again when used
        assert await reopened.get(NS, "after") is not None

    async def test_four_threads_writing_at_once_lose_nothing(self, open_memory_store: Any) -> None:
        store = open_memory_store()
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            try:
                for i in range(25):
                    store.put_sync(NS, f"w{worker}-{i}", {"worker": worker, "i": i})
                    store.put_sync(NS, "shared", {"worker": worker, "i": i})
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        found = await store.search(NS, limit=1000)
        assert len(found) == 101
        shared = await store.get(NS, "shared")
        assert shared is not None and shared.value["i"] == 24
