"""``main``: the ``nodestep`` console script, and its one line when the extra is missing."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``nodestep`` command line; return its exit code.

    Args:
        argv: The arguments after the program name; ``None`` takes ``sys.argv[1:]``.

    Returns:
        0 when the command did its work, 1 on an error, 2 on a usage error, 141 when the
        reader of stdout closed it (``nodestep export T | head -1``), as a Unix tool's.

    Why the imports wait until here: the command line needs click and rich, an extra; the
    console script is installed with nodestep itself, so without them it must still start
    and say what to install, in one line.
    """
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as e:
        print(
            f"nodestep: the command line needs {e.name or 'click and rich'}: "
            f"pip install 'nodestep[cli]'",
            file=sys.stderr,
        )
        return 1
    from nodestep.cli._app import run_cli

    return run_cli(argv)
