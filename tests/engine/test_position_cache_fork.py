"""A child forked while another thread holds a graph's position cache runs on the graph.

A child of ``os.fork`` has only the thread that forked: a lock another thread held at that
moment stays held in the child, and the cache's next write (at the end of every run) would
wait for it forever. The cache makes its lock new in the child.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from pathlib import Path

import pytest

from nodestep import END, START, BaseState, Graph, node
from nodestep._engine.positions import PositionCache
from nodestep.store import FilesystemStateStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


class Count(BaseState):
    n: int = 0


@node
def bump(state: Count) -> dict[str, int]:
    return {"n": state.n + 1}


@pytest.mark.slow
def test_a_child_forked_while_the_position_cache_is_locked_runs_the_graph(tmp_path: Path) -> None:
    graph = Graph(Count, state_store=FilesystemStateStore(tmp_path / "threads.log")).flow(
        START >> bump, bump >> END
    )
    assert graph.invoke({}, thread_id="parent").state.n == 1
    caches = [obj for obj in gc.get_objects() if isinstance(obj, PositionCache)]
    assert caches
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        for cache in caches:
            cache._lock.acquire()
        held.set()
        release.wait()
        for cache in caches:
            cache._lock.release()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        signal.alarm(20)  # a hang kills the child, and the test fails instead of hanging
        ok = graph.invoke({}, thread_id="child").state.n == 1
        os._exit(0 if ok else 3)
    release.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert graph.invoke({}, thread_id="parent").state.n == 2
