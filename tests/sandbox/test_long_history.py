"""A thread of 10,000 events: the page shows one page of them, and paints at once."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.sync_api import expect
from sandbox_graphs import counter
from sandbox_process import running

from nodestep import SQLiteStateStore

pytestmark = pytest.mark.slow


async def _long_thread(path: Path) -> int:
    store = SQLiteStateStore(path)
    try:
        await counter.ainvoke({"limit": 9_900}, thread_id="long", state_store=store)
        return await store.last_sequence("long", "main")
    finally:
        await store.aclose()


def _paint_ms(page: Any) -> float:
    """Return the page's first contentful paint, in ms from the start of its navigation."""
    return float(
        page.evaluate(
            """() => new Promise((resolve) => new PerformanceObserver((list) => {
                const entry = list.getEntriesByName('first-contentful-paint')[0];
                if (entry) resolve(entry.startTime);
            }).observe({type: 'paint', buffered: true}))"""
        )
    )


def test_a_thread_of_10000_events_is_paged_and_paints_fast(
    page: Any, tmp_path: Path, screens: Path
) -> None:
    # Playwright's sync API holds this thread's event loop: the history is written in another.
    with ThreadPoolExecutor(1) as pool:
        last = pool.submit(anyio.run, _long_thread, tmp_path / "long.db").result()
    assert last >= 10_000
    with running(f"sqlite:///{tmp_path / 'long.db'}", tmp_path) as base:
        page.goto(f"{base}/ui/threads/long")
        page.goto(f"{base}/ui/threads/long")  # the second visit: the server is warm
        newest = _paint_ms(page)
        events = page.get_by_role("list", name="Events, newest first").locator("li")
        expect(events).to_have_count(50)
        expect(events.first).to_contain_text(f"#{last} run_completed")
        expect(page.locator(".values dd").first).to_have_text("9900")
        page.goto(f"{base}/ui/threads/long?upto=5000&at=")
        middle = _paint_ms(page)
        expect(events.first).to_contain_text("#5000")
        page.get_by_role("link", name="Older events").click()
        expect(events.first).to_contain_text("#4950")
        page.get_by_role("link", name=re.compile(r"^#4949 ")).click()
        expect(page.get_by_role("heading", name=re.compile("State after event"))).to_be_visible()
        at = int(page.locator(".values dd").first.inner_text())
        assert 4_700 < at < 4_950
        page.screenshot(path=screens / "3-long-history.png")
        page.goto(f"{base}/ui/store?status=completed")  # written without the server
        expect(page.get_by_role("row", name=re.compile("^long completed"))).to_contain_text(
            f"{last}"
        )
    print(f"first paint, {last:,} events: newest page {newest:.0f} ms, page 5,000 {middle:.0f} ms")
