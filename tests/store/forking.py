"""Run test code in forked child processes (POSIX only)."""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

import pytest

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


def in_child(body: Callable[[], int | None]) -> int:
    """Fork; run ``body`` in the child, which exits with its result (1 if it raised).

    Returns:
        The child's pid.
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, whose coverage is not collected
        code = 1
        try:
            code = body() or 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def wait(pid: int, timeout: float = 20.0) -> int:
    """Wait for the child ``pid`` and return its exit code (negative: killed by that signal)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"child {pid} did not finish within {timeout} s")
        time.sleep(0.002)
