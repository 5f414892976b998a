"""The displays in a real notebook: examples/displays.ipynb, run by nbclient in a kernel,
shows what it saved; and each display, drawn by a headless Chromium, is not blank.

The notebook is written by scripts/make_displays_notebook.py. Its ids and clock are
injected, so every output but the graph drawings (which follow the installed Graphviz)
must come out byte for byte as saved.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need the test extra")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need the test extra")

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "displays.ipynb"
CHROMIUM = os.environ.get("NODESTEP_CHROMIUM", "/usr/bin/chromium")
# Chromium as a headless renderer only: no GPU, no sandbox (a container has none to
# give), and none of the background calls home a first run makes.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The display each output shows (by the panel's class), in the notebook's order.
KINDS = [
    "nodestep-graph",
    "nodestep-result",
    "nodestep-interrupt",
    "nodestep-history",
    "nodestep-history",
    "nodestep-snapshot",
    "nodestep-branch",
    "nodestep-store",
    "nodestep-agent",
    "nodestep-agent-step",
]


def _outputs(notebook: Any) -> list[dict[str, Any]]:
    found = []
    for cell in notebook.cells:
        assert len(cell.outputs) == 1, cell.source
        found.append(cell.outputs[0])
    return found


@pytest.fixture(scope="module")
def executed() -> Iterator[list[dict[str, Any]]]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    saved = json.loads(json.dumps(_outputs(notebook)))
    for cell in notebook.cells:
        cell.outputs = []
    where = {"metadata": {"path": str(NOTEBOOK.parent)}}
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", resources=where).execute()
    yield [saved, _outputs(notebook)]  # type: ignore[list-item]


def test_every_cell_shows_its_display_as_saved(executed: list[Any]) -> None:
    saved, fresh = executed
    assert len(fresh) == len(KINDS)
    for kind, before, after in zip(KINDS, saved, fresh, strict=True):
        assert after["output_type"] == "execute_result"
        data = after["data"]
        assert f'class="nodestep-view {kind}"' in data["text/html"], kind
        assert set(data) == set(before["data"]), kind
        if kind == "nodestep-graph":
            assert set(data) == {"text/plain", "text/html", "image/svg+xml", "text/vnd.mermaid"}
            assert data["text/vnd.mermaid"] == before["data"]["text/vnd.mermaid"]
        else:
            assert data == before["data"], kind


def test_the_script_in_the_state_is_shown_as_text(executed: list[Any]) -> None:
    _, fresh = executed
    html = "".join(out["data"]["text/html"] for out in fresh)
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#x27;hi&#x27;)&lt;/script&gt;" in html


def _nonblank_share(page: Any, png: bytes) -> float:
    """The share of a screenshot's pixels that are not (near) white, counted by the
    browser itself (no image library needed)."""
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    share: float = page.evaluate(
        """async (url) => {
            const img = new Image(); img.src = url; await img.decode();
            const c = document.createElement('canvas');
            c.width = img.width; c.height = img.height;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            const d = g.getImageData(0, 0, c.width, c.height).data;
            let ink = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i] + d[i+1] + d[i+2] < 600) ink++;
            return ink / (d.length / 4);
        }""",
        url,
    )
    return share


@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and os.environ.get("NODESTEP_REQUIRE_DISPLAY_TOOLS") != "1",
    reason=f"no Chromium at {CHROMIUM} (.ci/run installs it, and requires it)",
)
def test_each_display_draws_in_a_browser(executed: list[Any], tmp_path: Path) -> None:
    from playwright import sync_api  # in the test extra

    _, fresh = executed
    keep = os.environ.get("NODESTEP_SCREENSHOTS")  # a folder to keep the PNGs in
    with sync_api.sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        for number, (kind, out) in enumerate(zip(KINDS, fresh, strict=True), 1):
            page.set_content(f"<html><body>{out['data']['text/html']}</body></html>")
            png = page.locator(".nodestep-view").screenshot()
            path = tmp_path / f"{number:02d}-{kind}.png"
            path.write_bytes(png)
            if keep:
                shutil.copy(path, Path(keep) / path.name)
            share = _nonblank_share(page, png)
            assert 0.01 < share < 0.9, f"{kind}: {share:.3f} of the pixels are ink"
        browser.close()
    assert [url for url in requests if not url.startswith(("data:", "about:"))] == []
