"""Run ``nodestep sandbox`` as a real process on a free port, and a browser to drive it."""

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

import httpx

HERE = Path(__file__).resolve().parent
NODESTEP = Path(sys.executable).with_name("nodestep")
CHROMIUM = os.environ.get("NODESTEP_CHROMIUM", "/usr/bin/chromium")
# Chromium with no GPU, no sandbox (a container has none to give), no calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERVED = ("pricing", "chat", "refund", "counter", "refunds", "support", "broken")
GRAPHS = [f"sandbox_graphs:{name}" for name in SERVED]


def free_port() -> int:
    """Return a port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(
    store: str, port: int, cwd: Path, *, token: str | None = None, command: str = "sandbox"
) -> subprocess.Popen[bytes]:
    """Start ``nodestep sandbox`` (or ``serve --ui``) and wait until it answers ``/ok``."""
    args = [str(NODESTEP), command, *GRAPHS, "--store", store, "--port", str(port)]
    if command == "serve":
        args.append("--ui")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(HERE)}
    env.pop("NODESTEP_API_TOKEN", None)
    if token:
        args += ["--token", token]
    process = subprocess.Popen(args, env=env, cwd=cwd)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            if process.poll() is not None:
                raise RuntimeError(f"the sandbox exited with {process.returncode}") from None
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the sandbox did not answer /ok in 30 s")


@contextmanager
def running(
    store: str, cwd: Path, *, token: str | None = None, command: str = "sandbox"
) -> Iterator[str]:
    """Run the sandbox on ``store`` for the block; yield its base URL."""
    port = free_port()
    process = start(store, port, cwd, token=token, command=command)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
