"""nodestep on a platform without file locks (no ``fcntl``, e.g. Python built for WebAssembly).

The package and the in-memory store work there; only the file store refuses, saying why
and what to use instead. Each check runs in a fresh interpreter in which ``fcntl`` cannot
be imported.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import sys

    sys.modules["fcntl"] = None  # import fcntl now raises ImportError, as where it is missing

    import anyio

    import nodestep
    from nodestep import (
        END, START, BaseState, FilesystemStateStore, Graph, InMemoryStateStore,
        StateStoreError, node,
    )

    assert "fcntl" not in {m for m, v in sys.modules.items() if v is not None}


    class Count(BaseState):
        n: int = 0


    @node
    def bump(state: Count) -> dict:
        return {"n": state.n + 1}


    graph = Graph(Count, state_store=InMemoryStateStore()).flow(START >> bump, bump >> END)
    assert graph.invoke({"n": 1}, thread_id="t").state.n == 2
    assert graph.invoke({}, thread_id="t").state.n == 3  # a second turn reads the store
    print("memory store ran")

    path = sys.argv[1]
    try:
        FilesystemStateStore(path)
    except StateStoreError as error:
        assert error.path == path, error.path
        assert isinstance(error.__cause__, ImportError), repr(error.__cause__)
        print(error)
    else:
        raise SystemExit("FilesystemStateStore opened a file without a lock")
    """
)


@pytest.fixture(scope="module")
def no_fcntl(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Run ``SCRIPT`` once; the tests read its outcome."""
    tmp_path = tmp_path_factory.mktemp("no_fcntl")
    script = tmp_path / "no_fcntl.py"
    script.write_text(SCRIPT)
    history = tmp_path / "history.jsonl"
    done = subprocess.run(
        [sys.executable, str(script), str(history)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return history, done


def test_nodestep_imports_and_runs_in_memory_without_fcntl(no_fcntl):
    _, done = no_fcntl
    assert done.returncode == 0, done.stderr
    assert "memory store ran" in done.stdout


def test_file_store_without_fcntl_refuses_saying_why_and_what_to_use(no_fcntl):
    history, done = no_fcntl
    assert done.returncode == 0, done.stderr
    message = done.stdout.splitlines()[-1]
    assert f"FilesystemStateStore cannot lock '{history}'" in message
    assert "the fcntl module is missing" in message
    assert "could corrupt it" in message
    assert "Use InMemoryStateStore, or a StateStore of your own" in message
    assert not history.exists(), "the refused store created its file"
