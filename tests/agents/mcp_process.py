"""Start the MCP test servers as real processes: over stdio (a command) or HTTP (a URL)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).parent
TOOLS_SCRIPT = HERE / "mcp_server_script.py"
GRAPH_SCRIPT = HERE / "mcp_graph_script.py"


def tools_command(*flags: str) -> list[str]:
    """The command that serves the test tools over stdio."""
    return [sys.executable, str(TOOLS_SCRIPT), "stdio", *flags]


def graph_command(which: str) -> list[str]:
    """The command that serves a nodestep graph (``pricing`` or ``chat``) over stdio."""
    return [sys.executable, str(GRAPH_SCRIPT), which, "stdio"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the MCP server did not listen within 30 s")


@contextmanager
def http_server(script: Path, *args: str) -> Iterator[str]:
    """Run ``script ... http PORT`` for the block; yield its MCP endpoint's URL."""
    port = _free_port()
    command = [sys.executable, str(script), *args, "http", str(port)]
    process = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        _wait_for(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
