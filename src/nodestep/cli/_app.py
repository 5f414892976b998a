"""The ``nodestep`` command group: every command, and the exit codes they share."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from nodestep.cli._graphs import GRAPH_COMMANDS
from nodestep.cli._insight import INSIGHT_COMMANDS
from nodestep.cli._threads import THREAD_COMMANDS
from nodestep.cli._transfer import TRANSFER_COMMANDS

__all__ = ["PIPE_CLOSED", "cli", "run_cli"]

# The code a Unix tool's shell reports when the reader of its output went away: the tool
# dies of SIGPIPE, 128 + 13. (Windows has no SIGPIPE: there it is the code of an error.)
PIPE_CLOSED = 128 + signal.SIGPIPE.value if hasattr(signal, "SIGPIPE") else 1

_EPILOG = """\b
Every command takes --store URL (default: $NODESTEP_STORE): a file path, sqlite:///h.db,
postgresql://user@host/db, or memory: for `run`. --json prints JSON for scripts.
Exit codes: 0 done, 1 an error (one line; --debug shows the traceback), 2 a usage error,
141 the reader of the output closed it (as in `nodestep history T | head`).
"""


class _PipeClosed(Exception):
    """The reader of stdout closed it: the command ends, quietly."""


class _Group(click.Group):
    """A command group that lets a closed stdout through click to ``run_cli``.

    Why: click ends on a closed pipe with exit code 1, the code of an error, and Python may
    still print a ``BrokenPipeError`` when it flushes stdout at exit.
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Read the arguments (``--help`` and ``--version`` print here)."""
        with _pipe_closed_passes():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command."""
        with _pipe_closed_passes():
            return super().invoke(ctx)


@contextmanager
def _pipe_closed_passes() -> Iterator[None]:
    """Turn a write to a closed stdout into ``_PipeClosed``, which click does not catch."""
    try:
        yield
    except BrokenPipeError as e:
        raise _PipeClosed from e


@click.group(cls=_Group, epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nodestep", prog_name="nodestep")
def cli() -> None:
    """Read, fork, move and run nodestep threads and graphs from a terminal."""


for command in [*THREAD_COMMANDS, *INSIGHT_COMMANDS, *TRANSFER_COMMANDS, *GRAPH_COMMANDS]:
    cli.add_command(command)


def run_cli(argv: Sequence[str] | None) -> int:
    """Run the group on ``argv`` (``sys.argv[1:]`` when ``None``); return the exit code.

    When the reader of stdout closes it (``nodestep export T | head -1``), the command ends
    without a word and the code is ``PIPE_CLOSED``, as a Unix tool's would be.
    """
    try:
        try:
            cli.main(
                args=list(argv) if argv is not None else None,
                prog_name="nodestep",
                standalone_mode=True,
            )
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        else:
            code = 0
        # What is still buffered goes now, where a closed pipe is caught, not at exit.
        sys.stdout.flush()
    except (_PipeClosed, BrokenPipeError):
        _silence_stdout()
        return PIPE_CLOSED
    return code


def _silence_stdout() -> None:
    """Point stdout at the null device, so Python's flush at exit has nowhere to fail.

    Why the file descriptor: Python flushes and closes ``sys.stdout`` as it exits, and the
    output still buffered for the closed pipe would fail there, with a traceback-like
    message. This is the way Python's documentation gives (``signal``, "Note on SIGPIPE").
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream in memory: nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
