"""Start the test server as a real process on a free port, and stop it."""

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

LAUNCHER = Path(__file__).with_name("serve_launcher.py")


def free_port() -> int:
    """Return a port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_ok(
    process: subprocess.Popen[bytes], port: int, what: str = "the server"
) -> subprocess.Popen[bytes]:
    """Return ``process`` once it answers ``/ok`` on ``port``; fail if it exits or takes 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited with {process.returncode}") from None
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{what} did not answer /ok in 30 s")


def start(store: str, port: int, token: str | None = None) -> subprocess.Popen[bytes]:
    """Start the launcher and wait until it answers ``/ok``."""
    args = [sys.executable, str(LAUNCHER), str(port), store, *([token] if token else [])]
    return wait_for_ok(subprocess.Popen(args, env={**os.environ, "PYTHONUNBUFFERED": "1"}), port)


def stop(process: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """Stop the server: SIGKILL with ``kill``, else SIGTERM; wait for it."""
    process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    process.wait(timeout=30)


@contextmanager
def running(store: str, token: str | None = None) -> Iterator[str]:
    """Run a server on ``store`` for the block; yield its base URL."""
    port = free_port()
    process = start(store, port, token)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
