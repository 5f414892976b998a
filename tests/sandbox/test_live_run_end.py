"""How the live view of a run says the run ended, in Chromium: a cancelled run is
``cancelled`` (the API's ``interrupted``), and only a pause that asks a question links to
the interrupt form. The runs are made through the API, as a LangGraph client makes them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from sandbox_process import running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running("memory:", tmp_path_factory.mktemp("sandbox")) as url:
        yield url


def until(check: Callable[[], Any], what: str) -> Any:
    """Return ``check()`` once it is true; fail after 10 s (the run is in another process)."""
    deadline = time.monotonic() + 10
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


def test_a_cancelled_run_shows_cancelled_and_offers_no_answer(page: Any, base: str) -> None:
    with httpx.Client(base_url=base) as api:
        tid = api.post("/threads", json={}).json()["thread_id"]
        body = {"assistant_id": "hold", "input": {"seconds": 60}}
        run = api.post(f"/threads/{tid}/runs", json=body).json()["run_id"]
        until(lambda: api.get(f"/threads/{tid}/state").json()["next"] == ["hold_on"], "the step")
        assert api.post(f"/threads/{tid}/runs/{run}/cancel?wait=1").status_code == 202
        assert api.get(f"/threads/{tid}/runs/{run}").json()["status"] == "interrupted"
    page.goto(f"{base}/ui/threads/{tid}/runs/{run}")
    expect(page.locator("#run-status")).to_have_text("cancelled")
    expect(page.get_by_role("link", name="Answer the interrupt")).to_be_hidden()


def test_a_pause_before_a_node_shows_paused_with_no_question_to_answer(
    page: Any, base: str
) -> None:
    with httpx.Client(base_url=base) as api:
        tid = api.post("/threads", json={}).json()["thread_id"]
        body = {"assistant_id": "pricing", "input": {"items": ["tea"]}}
        paused = body | {"interrupt_before": ["receipt"]}
        run = api.post(f"/threads/{tid}/runs", json=paused).json()["run_id"]
        api.get(f"/threads/{tid}/runs/{run}/join")
        assert api.get(f"/threads/{tid}").json()["status"] == "interrupted"
    page.goto(f"{base}/ui/threads/{tid}/runs/{run}")
    expect(page.locator("#run-status")).to_have_text("paused")
    expect(page.get_by_role("link", name="Answer the interrupt")).to_be_hidden()
