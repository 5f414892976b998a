"""Run test code in forked child processes (POSIX only), and drive stores from such tests.

A test that forks is a plain ``def`` test, not an async one: a child forked while an event
loop runs inherits that loop as running, so it could not start one of its own (asyncio and
trio both refuse). Such a test drives the store with ``runner(anyio_backend)`` instead, a
new event loop per call, in the parent and in its children alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio
import pytest

from nodestep.testing import checkpoint, event, seqs

T = TypeVar("T")

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


def runner(backend: str) -> Callable[[Coroutine[Any, Any, T]], T]:
    """Return ``run(coro)``, which runs ``coro`` to completion on a new loop of ``backend``."""

    def run(coro: Coroutine[Any, Any, T]) -> T:
        async def main() -> T:
            return await coro

        return anyio.run(main, backend=backend)

    return run


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


def in_fresh_interpreter(body: Callable[..., None], *args: str, timeout: float = 300) -> None:
    """Run ``body(*args)`` in a new Python process; fail the test with its output if it fails.

    For a test that forks many children: a fork copies its parent's page tables, which grow
    with everything the test session has loaded and made (on a 2-core VM, about 20 ms a fork
    at 300 MB against 0.5 ms for a bare interpreter). ``body`` runs in a process holding only
    what its module imports, and forks from there. It must be a module-level function, found
    again by its module's name on this process's ``sys.path``.
    """
    code = (
        f"import sys; sys.path[:0] = {sys.path!r}; "
        f"from {body.__module__} import {body.__name__} as body; body(*sys.argv[1:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{body.__name__} failed:\n{done.stdout}{done.stderr}"


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
        time.sleep(0.002)  # polls: waitpid cannot wait at most a given time


def kill_and_collect(pid: int, read_end: int, write_end: int, delay: float) -> list[str]:
    """After ``delay`` s, SIGKILL the child ``pid``; return the lines it wrote to the pipe.

    The parent's ``write_end`` is closed first, so the read ends when the dead child's does.
    """
    os.close(write_end)
    time.sleep(delay)  # real time: a kill at a random moment of the child's work
    os.kill(pid, signal.SIGKILL)
    assert wait(pid) == -signal.SIGKILL
    data = b""
    while chunk := os.read(read_end, 1 << 16):
        data += chunk
    os.close(read_end)
    return data.decode().splitlines()


def append_until_killed(
    store: Any, write_end: int, run: Callable[[Coroutine[Any, Any, Any]], Any], pad: int = 500
) -> None:
    """In a child: append batches of three records to thread ``t1`` of ``store`` and write
    ``ack <last sequence>`` to ``write_end`` after each, until the child is killed."""

    async def go() -> None:
        last = await store.last_sequence("t1", "main")
        while True:
            batch = [event(last + 1, pad="x" * pad), checkpoint(last + 2), event(last + 3)]
            await store.append("t1", "main", batch, after=last)
            last += 3
            os.write(write_end, f"ack {last}\n".encode())

    run(go())


def whole_appends(
    store: Any, acked: list[str], run: Callable[[Coroutine[Any, Any, Any]], Any]
) -> int:
    """After ``append_until_killed``'s child was killed: check that thread ``t1`` holds
    whole appends only, numbered without a gap, and every acknowledged one; return how
    many records it holds."""
    found = seqs(run(store.read("t1", "main")))
    assert found == list(range(1, len(found) + 1))
    assert len(found) % 3 == 0  # never part of an append
    if acked:
        assert len(found) >= int(acked[-1].split()[1])
    return len(found)
