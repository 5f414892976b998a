"""The LangGraph JS client (``@langchain/langgraph-sdk``, through Node) against a real server.

``js/use_stream_calls.mjs`` makes the calls the ``useStream`` hook makes. The package is
installed once with npm into a cache folder; without Node and npm the test is skipped.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from serve_process import running
from served_agent import serving_agent

pytestmark = pytest.mark.slow

HERE = Path(__file__).with_name("js")


def client_folder() -> Path:
    """Return a folder with the JS client installed and the scripts beside it."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node and npm are needed for the JS client test")
    manifest = (HERE / "package.json").read_bytes()
    folder = Path.home() / ".cache" / "nodestep-tests" / hashlib.sha256(manifest).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    # One installer at a time: the tests of parallel workers (or of two checkouts) share it.
    with (folder.parent / f"{folder.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
            (folder / "package.json").write_bytes(manifest)
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund"], cwd=folder, check=True, timeout=300
            )
        for script in ("use_stream_calls.mjs", "agent_chat.mjs"):
            # Replaced whole, never rewritten in place: another worker's Node may read it.
            shutil.copy(HERE / script, folder / f"{script}.new")
            (folder / f"{script}.new").replace(folder / script)
    return folder


def run_script(folder: Path, script: str, url: str) -> dict[str, Any]:
    """Run a script of ``folder`` with Node against the server at ``url``; return its report."""
    done = subprocess.run(
        ["node", script, url], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_js_client_streams_resumes_joins_cancels_and_deletes_as_use_stream_does(
    tmp_path: Path,
) -> None:
    folder = client_folder()
    with running(f"sqlite:///{tmp_path / 'threads.db'}") as url:
        report = run_script(folder, "use_stream_calls.mjs", url)
    assert report["events"][0] == "metadata"
    assert {"values", "messages"} <= set(report["events"])
    assert report["created"]["run_id"]  # read from Content-Location
    assert report["chunkTypes"] == ["AIMessageChunk"]
    assert report["chunkNodes"] == ["agent"]
    assert report["text"] == "echo: hi from js"
    assert report["messages"] == [
        ["human", "js-1", "hi from js"],
        ["ai", report["chunkIds"][0], "echo: hi from js"],
    ]
    assert report["headIsState"] and report["linked"]
    assert report["headNext"] == []
    assert report["pausedLast"] == report["headInterrupts"]
    assert report["pausedLast"][0]["value"] == {"question": "approve leave?"}
    assert report["resumedLast"] == {"request": "leave", "answer": "granted", "done": True}
    assert report["joinedEvents"][0] == "metadata"
    assert report["cancelled"] and report["deleted"]


def test_the_js_client_chats_with_a_served_agent(tmp_path: Path) -> None:
    folder = client_folder()
    with serving_agent(tmp_path) as url:
        report = run_script(folder, "agent_chat.mjs", url)
    assert report["text"] == "User 7 is Ada."
    kinds = [kind for kind, _, _ in report["messages"]]
    assert kinds == ["human", "ai", "tool", "ai"]
    assert report["toolCalls"] == ["get_user"]
    assert report["messages"][-1][1:] == [report["chunkIds"][0], "User 7 is Ada."]
    assert report["stateMessages"] == [message_id for _, message_id, _ in report["messages"]]
