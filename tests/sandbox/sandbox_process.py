"""Run ``nodestep sandbox`` as a real process on a free port, and a browser to drive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "serve"))  # tests/serve: starting a server process
from serve_process import free_port, wait_for_ok  # noqa: E402

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
SERVED = ("pricing", "chat", "refund", "counter", "refunds", "support", "mute", "broken", "hold")
GRAPHS = [f"sandbox_graphs:{name}" for name in SERVED]


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
    return wait_for_ok(subprocess.Popen(args, env=env, cwd=cwd), port, "the sandbox")


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
