"""Fixtures of the sandbox's browser tests: a Chromium, and a folder for screenshots."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_process import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, driven by Playwright (which never downloads a browser here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as play:
        launched = play.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (its own cookies) that fails the test on any dialog or script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    problems: list[str] = []
    opened.on(
        "dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss())
    )
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    opened.problems = problems
    yield opened
    context.close()
    assert problems == []


@pytest.fixture(scope="session")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder screenshots go to: $NODESTEP_SANDBOX_SCREENS, or a temporary one."""
    chosen = os.environ.get("NODESTEP_SANDBOX_SCREENS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("sandbox-screens")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"sandbox screenshots: {folder}")
    return folder
