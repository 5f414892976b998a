"""What every command shares: ``--store``, ``--json``, ``--debug``, output and errors.

Exit codes: 0 done, 1 an error (one line on stderr, naming what was wrong and the fix; the
traceback only with ``--debug``), 2 a usage error (click's own, or a value of the wrong
form, such as ``--input`` that is not JSON).
"""

from __future__ import annotations

import errno
import json
import math
import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import anyio
import click
from rich.console import Console, HighlighterType, JustifyMethod, OverflowMethod
from rich.style import Style
from rich.text import Text

from nodestep import NodestepError, open_store
from nodestep.store import StateStore

__all__ = [
    "CommandError",
    "Output",
    "PlainConsole",
    "common_options",
    "open_url",
    "parse_time",
    "run_async",
    "shell",
    "stdin_is_terminal",
    "store_option",
    "visible",
]

F = TypeVar("F", bound=Callable[..., Any])

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class CommandError(click.ClickException):
    """An error of a command: exit code 1, one line naming the command."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        ctx = click.get_current_context(silent=True)
        self.command = ctx.command_path if ctx is not None else "nodestep"

    def show(self, file: Any = None) -> None:
        """Print ``nodestep COMMAND: message`` on stderr."""
        click.echo(f"{self.command}: {self.format_message()}", err=True)


class PlainConsole(Console):
    """A Rich console that prints text as it is, for text read from a store.

    Why: thread ids, branch ids, node names and error messages are anyone's text (a
    client of ``nodestep serve`` names its threads). Rich would read ``[/x]`` in one as
    markup and fail, ``:smile:`` as an emoji, and pass an escape sequence or a line break
    on to the terminal, where it could clear the screen or forge a row. So markup and
    emoji codes are off, and each unprintable character shows as its Python escape
    (``\\x1b``), as the drawings show it.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options, markup=False, emoji=False)

    def on_broken_pipe(self) -> None:
        """Let a closed pipe end the command as ``run_cli`` ends it: quietly, code 141.

        Rich would point stdout at the null device and exit with 1, the code of an error.
        """
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: HighlighterType | None = None,
    ) -> Text:
        """Turn ``text`` into Rich text, as it is: no markup, no emoji, controls escaped."""
        return super().render_str(
            visible(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=False,
            markup=False,
            highlight=highlight,
            highlighter=highlighter,
        )


def shell(text: str) -> str:
    """Return ``text`` as a shell word, for a command a message tells the user to run.

    Why: a thread id may hold a space, ``[`` or ``&``; pasted unquoted, the command
    would name another thread or fail in the shell.
    """
    return shlex.quote(text)


def visible(text: str) -> str:
    """Return ``text`` with each unprintable character written as its escape (``\\x1b``).

    The drawings write names so too (``_display.diagram.visible``, a layer the command line
    does not import).
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class Output:
    """Where a command writes: a Rich table for people, or JSON with ``--json``."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        # Tables go to stdout as they are; a pipe gets them at the terminal's width or
        # $COLUMNS, never cut: long cells fold onto the next line.
        self.console = PlainConsole(highlight=False, soft_wrap=False)

    def json(self, data: Any) -> None:
        """Print ``data`` as indented JSON (keys in the order given)."""
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def print(self, *objects: Any) -> None:
        """Print Rich renderables or text for people."""
        self.console.print(*objects)


def store_option(required: bool = True) -> Callable[[F], F]:
    """Add ``--store URL`` (default: ``$NODESTEP_STORE``)."""
    help_text = "The store: a file path, sqlite:///path.db, postgresql://... "
    if required:
        help_text += "(default: $NODESTEP_STORE)."
    else:
        help_text += (
            "or memory: (default: $NODESTEP_STORE, else the graph's own store, else memory:)."
        )
    return click.option(
        "--store", "store_url", envvar="NODESTEP_STORE", metavar="URL", help=help_text
    )


def common_options(fn: F) -> F:
    """Add ``--json`` and ``--debug``."""
    fn = click.option("--debug", is_flag=True, help="Show the traceback of an error.")(fn)
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(fn)


def open_url(url: str | None, *, memory_ok: bool = False, create: bool = False) -> StateStore:
    """Open the store ``--store`` names; a bare path is a file store (SQLite for ``.db``).

    Args:
        url: The ``--store`` value.
        memory_ok: Whether ``memory:`` makes sense (for ``run``).
        create: Whether a local store that does not exist yet is made. Only ``run`` and
            ``import`` make one: a typo in a path given to ``threads`` must not leave an
            empty store behind and list nothing.

    Raises:
        click.UsageError: No store was given, or ``memory:`` where nothing could be in it.
        CommandError: A local store that does not exist, with ``create=False``.
    """
    if not url:
        raise click.UsageError("give the store: --store URL, or set NODESTEP_STORE")
    if url.split(":", 1)[0].lower() == "memory" and not memory_ok:
        raise click.UsageError(
            f"--store {url!r} is a new, empty store in each process; name a file, sqlite: or "
            f"postgresql: store that holds the threads"
        )
    if ":" not in url:
        path = Path(url).resolve()
        scheme = "sqlite" if path.suffix in _SQLITE_SUFFIXES else "file"
        url = f"{scheme}://{path.as_posix()}"
    local = _local_path(url)
    if not create and local is not None and not local.exists():
        raise CommandError(
            f"no store at {str(local)!r}; check the path (only run and import make a new store)"
        )
    return open_store(url)


def _local_path(url: str) -> Path | None:
    """The file of a ``file:`` or ``sqlite:`` URL, read as ``open_store`` reads it."""
    scheme = url.split(":", 1)[0].lower()
    if scheme not in ("file", "sqlite"):
        return None
    path = unquote(urlsplit(url).path)
    if path.startswith("//"):  # SQLAlchemy's four slashes name the same absolute path
        path = "/" + path.lstrip("/")
    return Path(path) if path else None


def run_async(debug: bool, work: Callable[[], Awaitable[Any]]) -> Any:
    """Run a command's async body; turn its errors into one line and exit code 1.

    Why here, once: every command then prints the same form, ``nodestep CMD: message``,
    and ``--debug`` shows the traceback of any of them.
    """
    try:
        return anyio.run(work)
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except BrokenPipeError:
        # The reader of stdout closed it (`| head`): no error of the command; run_cli
        # ends it quietly.
        raise
    except (NodestepError, OSError, ValueError, LookupError, NotImplementedError) as e:
        if debug:
            raise
        raise CommandError(f"{type(e).__name__}: {_one_line(e)}") from e
    except Exception as e:
        if debug:
            raise
        raise CommandError(
            f"{type(e).__name__}: {_one_line(e)} (run again with --debug for the traceback)"
        ) from e


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or repr(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # A loader's list of problems keeps one problem a line; anything else is one line.
    return text if len(lines) > 1 and all(":" in line for line in lines[1:]) else " ".join(lines)


def stdin_is_terminal() -> bool:
    """Return whether a person types at stdin (else answers come from a pipe or a file)."""
    return sys.stdin.isatty()


def parse_time(text: str | None, option: str) -> float | None:
    """Read ``--updated-after`` and the like: ISO 8601 (UTC unless it says) or epoch seconds."""
    if text is None:
        return None
    wrong = click.BadParameter(
        f"{text!r} is not a time; write ISO 8601 ('2026-01-31' or '2026-01-31T12:00:00') "
        f"or seconds since the epoch",
        param_hint=option,
    )
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        # float() also reads "nan", "inf" and "1e400" (inf): no time, a usage error.
        if not math.isfinite(seconds):
            raise wrong
        return seconds
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise wrong from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
