"""A reader that closes ``nodestep``'s output early (``nodestep export T | head -1``): the
command ends quietly, with the code a Unix tool's shell reports for it, 141 (128 + SIGPIPE).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from cli_helpers import NODESTEP, script_environ, write_blog_thread

pytestmark = [
    pytest.mark.slow,  # each test starts a Python process or two
    pytest.mark.skipif(sys.platform == "win32", reason="no SIGPIPE, so no code 141"),
]

# A reader that takes the first line and goes away, as `head -1` does.
FIRST_LINE = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.readline())"]


def closed_pipe_run(args: Sequence[str], cwd: Path) -> tuple[int, str]:
    """Run ``nodestep ARGS`` with its stdout a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [str(NODESTEP), *args],
            cwd=cwd,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=script_environ(),
            timeout=120,
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a thread whose export is megabytes: far more than a pipe holds."""
    path = tmp_path_factory.mktemp("pipe") / "history.db"
    write_blog_thread(f"sqlite://{path}", "big", topic="tea " * 250_000, answer="publish")
    write_blog_thread(f"sqlite://{path}", "blog-1", answer="publish")
    return path


def test_export_into_a_reader_that_stops_after_one_line_ends_quietly(store: Path) -> None:
    export = subprocess.Popen(
        [str(NODESTEP), "export", "big", "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=script_environ(),
    )
    assert export.stdout is not None and export.stderr is not None
    reader = subprocess.run(FIRST_LINE, stdin=export.stdout, capture_output=True, timeout=120)
    # Only the reader holds the pipe now: when it goes, the export's writes fail.
    export.stdout.close()
    err = export.stderr.read()
    export.stderr.close()
    assert export.wait(timeout=120) == 141
    assert err == b""
    assert reader.stdout.startswith(b'{"type":"checkpoint"')


@pytest.mark.parametrize(
    "args",
    [
        ["export", "blog-1"],
        ["history", "blog-1"],
        ["history", "blog-1", "--json"],
        ["show", "blog-1"],
        ["threads"],
        ["threads", "--json"],
    ],
)
def test_a_closed_stdout_ends_a_command_quietly_with_code_141(
    store: Path, tmp_path: Path, args: list[str]
) -> None:
    code, err = closed_pipe_run([*args, "--store", str(store)], cwd=tmp_path)
    assert (code, err) == (141, "")


def test_help_into_a_closed_pipe_ends_quietly_with_code_141(tmp_path: Path) -> None:
    assert closed_pipe_run(["--help"], cwd=tmp_path) == (141, "")


def test_an_error_is_still_an_error_when_stdout_is_closed(store: Path, tmp_path: Path) -> None:
    code, err = closed_pipe_run(["history", "nope", "--store", str(store)], cwd=tmp_path)
    assert code == 1
    assert err.startswith("nodestep history: thread 'nope' has no history")
