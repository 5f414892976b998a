"""One journey on every store: run from the form, watch it finish, read the thread."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from sandbox_process import running

from postgres_server import throwaway_database

pytestmark = pytest.mark.slow


@contextmanager
def _store_url(kind: str, folder: Path) -> Iterator[str]:
    if kind == "postgresql":
        with throwaway_database() as dsn:
            yield dsn
    else:
        yield {
            "memory": "memory:",
            "file": f"file://{folder / 'threads.jsonl'}",
            "sqlite": f"sqlite:///{folder / 'threads.db'}",
        }[kind]


@pytest.mark.parametrize("kind", ["memory", "file", "sqlite", "postgresql"])
def test_a_run_from_the_form_is_read_back_on_every_store(
    kind: str, page: Any, tmp_path: Path, screens: Path
) -> None:
    with _store_url(kind, tmp_path) as url, running(url, tmp_path) as base:
        page.goto(f"{base}/ui/graphs/pricing")
        page.get_by_label("items (JSON)").fill('["tea", "cake", "jam"]')
        page.get_by_role("button", name="Run pricing").click()
        expect(page.locator("#run-status")).to_have_text("done")
        page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
        expect(page.locator(".values dd").nth(2)).to_have_text("9")
        expect(page.get_by_role("list", name="Events, newest first")).to_contain_text(
            "run_completed"
        )
        page.goto(f"{base}/ui/threads")
        expect(page.locator("tbody tr")).to_have_count(1)
        page.screenshot(path=screens / f"store-{kind}.png", full_page=True)
