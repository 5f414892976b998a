"""The ``nodestep`` command group: every command, and the exit codes they share."""

from __future__ import annotations

from collections.abc import Sequence

import click

from nodestep.cli._graphs import GRAPH_COMMANDS
from nodestep.cli._insight import INSIGHT_COMMANDS
from nodestep.cli._threads import THREAD_COMMANDS
from nodestep.cli._transfer import TRANSFER_COMMANDS

__all__ = ["cli", "run_cli"]

_EPILOG = """\b
Every command takes --store URL (default: $NODESTEP_STORE): a file path, sqlite:///h.db,
postgresql://user@host/db, or memory: for `run`. --json prints JSON for scripts.
Exit codes: 0 done, 1 an error (one line; --debug shows the traceback), 2 a usage error.
"""


@click.group(epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nodestep", prog_name="nodestep")
def cli() -> None:
    """Read, fork, move and run nodestep threads and graphs from a terminal."""


for command in [*THREAD_COMMANDS, *INSIGHT_COMMANDS, *TRANSFER_COMMANDS, *GRAPH_COMMANDS]:
    cli.add_command(command)


def run_cli(argv: Sequence[str] | None) -> int:
    """Run the group on ``argv`` (``sys.argv[1:]`` when ``None``); return the exit code."""
    try:
        cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="nodestep",
            standalone_mode=True,
        )
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0
