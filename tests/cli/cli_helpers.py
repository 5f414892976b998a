"""Helpers of the command line's tests: a thread written through the API (to read back
through the command line), and two ways to run ``nodestep``: in this process (click's
runner) or as the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from click.testing import CliRunner, Result

from nodestep import Resume, open_store
from nodestep.cli._app import cli

HERE = Path(__file__).resolve().parent
NODESTEP = Path(sys.executable).parent / "nodestep"


def write_blog_thread(
    url: str, thread_id: str = "blog-1", *, answer: str | None = None, topic: str = "food"
) -> None:
    """Run tests/cli/blog.py's graph on a thread of the store: paused, or answered."""
    from blog import graph

    async def work() -> None:
        store = open_store(url)
        try:
            await graph.ainvoke({"topic": topic}, thread_id=thread_id, state_store=store)
            if answer is not None:
                await graph.ainvoke(
                    None, thread_id=thread_id, resume=Resume(answer), state_store=store
                )
        finally:
            await store.aclose()

    anyio.run(work)


def invoke(args: Sequence[str], input: str | None = None) -> Result:
    """Run ``nodestep ARGS`` in this process, as click's test runner does."""
    return CliRunner().invoke(
        cli, list(args), input=input, env={"COLUMNS": "200"}, prog_name="nodestep"
    )


@dataclass
class Ran:
    """What the console script did: its exit code and its two streams."""

    code: int
    out: str
    err: str


def script_environ(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the tests run ``nodestep`` in: wide, no store, blog.py importable."""
    # The test graphs (blog.py) import from here, as a user's module would from the cwd; a
    # PYTHONPATH of the tests' own stays after it (to run the script on another checkout).
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    environ = {**os.environ, "COLUMNS": "200", "PYTHONPATH": path, **(env or {})}
    environ.pop("NODESTEP_STORE", None)
    return environ


def run_script(
    args: Sequence[str],
    *,
    cwd: Path,
    input: str | None = None,
    env: dict[str, str] | None = None,
    program: Sequence[str] = (str(NODESTEP),),
) -> Ran:
    """Run the installed ``nodestep`` console script (or ``program``), a real process."""
    done = subprocess.run(
        [*program, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=script_environ(env),
        timeout=120,
    )
    return Ran(done.returncode, done.stdout, done.stderr)
