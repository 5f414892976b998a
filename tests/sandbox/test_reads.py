"""What the pages read: a timeline's pages cover a branch exactly; the Host's name."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st
from sandbox_graphs import counter

from nodestep import InMemoryStateStore
from nodestep.sandbox._guard import host_name
from nodestep.sandbox._reads import Sandbox


def _walk(steps: int, size: int) -> tuple[int, list[int]]:
    async def walk() -> tuple[int, list[int]]:
        store = InMemoryStateStore()
        await counter.ainvoke({"limit": steps}, thread_id="t", state_store=store)
        sandbox = Sandbox({"counter": counter}, store, api=None, token=None)
        seen: list[int] = []
        upto: int | None = None
        while True:
            page = await sandbox.timeline("t", "main", upto, size)
            assert len(page.events) <= size
            seen += [e["seq"] for e in page.events]
            if page.older is None:
                return page.last, seen
            upto = page.older

    return anyio.run(walk)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(1, 60))
def test_the_pages_of_a_timeline_cover_the_branch_once_newest_first(steps: int, size: int) -> None:
    last, seen = _walk(steps, size)
    assert seen == list(range(last, 0, -1))


def test_the_host_name_leaves_the_port_out() -> None:
    assert host_name("LOCALHOST:2024") == "localhost"
    assert host_name("[::1]:2024") == "[::1]"
    assert host_name("127.0.0.1") == "127.0.0.1"
