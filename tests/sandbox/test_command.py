"""``nodestep sandbox`` and ``nodestep serve --ui`` as a user runs them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
from sandbox_process import HERE, NODESTEP, running

pytestmark = pytest.mark.slow


def test_serve_with_ui_serves_the_api_and_the_pages(tmp_path: Path) -> None:
    with running("memory:", tmp_path, command="serve") as base:
        assert httpx.get(f"{base}/ui").status_code == 200
        assert httpx.get(f"{base}/ui/graphs/support").status_code == 200
        assert httpx.get(f"{base}/assistants/pricing").json()["graph_id"] == "pricing"


@pytest.mark.parametrize("command", ["sandbox", "serve"])
def test_an_open_address_without_a_token_is_refused_with_the_fix(
    tmp_path: Path, command: str
) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    env.pop("NODESTEP_API_TOKEN", None)
    done = subprocess.run(
        [str(NODESTEP), command, "sandbox_graphs:pricing", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "give a token (--token or NODESTEP_API_TOKEN), or bind 127.0.0.1" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_ui_with_workers_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(NODESTEP), "serve", "x:y", "--ui", "--workers", "postgresql://q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--ui runs the graphs in the server process; leave --workers out" in done.stderr
