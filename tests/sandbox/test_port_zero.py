"""``nodestep sandbox --port 0``: the address printed is the one the server listens on."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from sandbox_process import HERE, NODESTEP

pytestmark = pytest.mark.slow


def _first_line(process: subprocess.Popen[str], timeout: float = 30) -> str:
    """Return the first line ``process`` prints; fail if it prints none in ``timeout`` s."""
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"the sandbox printed nothing in {timeout} s") from None


@pytest.mark.parametrize("command", ["sandbox", "serve"])
@pytest.mark.parametrize("token", [None, "s3cret-token"])
def test_port_zero_prints_the_port_the_server_listens_on(
    tmp_path: Path, command: str, token: str | None
) -> None:
    args = [str(NODESTEP), command, "sandbox_graphs:pricing", "--store", "memory:"]
    args += ["--port", "0", *(["--ui"] if command == "serve" else [])]
    args += ["--token", token] if token else []
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(HERE)}
    env.pop("NODESTEP_API_TOKEN", None)
    process = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        line = _first_line(process)
        found = re.fullmatch(r"nodestep sandbox: (http://127\.0\.0\.1:(\d+)/ui\S*)\n", line)
        assert found is not None, line
        assert found.group(2) != "0"
        # Printed once the server listens: the first request needs no retry.
        answer = httpx.get(found.group(1), follow_redirects=True, timeout=10)
        assert answer.status_code == 200
        assert "<title>nodestep sandbox</title>" in answer.text
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
