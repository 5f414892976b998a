"""Moving and trimming history: ``export``, ``import`` and ``prune``, with progress bars.

An export file is JSON Lines, one record a line, as ``export_thread`` returns them (its
checksum record last); ``import`` also reads a JSON array of the same records.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import orjson
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from nodestep.cli._common import (
    CommandError,
    Output,
    PlainConsole,
    common_options,
    open_url,
    parse_time,
    run_async,
    store_option,
)
from nodestep.store import export_thread, import_thread

__all__ = ["TRANSFER_COMMANDS"]


@contextmanager
def progress(quiet: bool) -> Iterator[Progress]:
    """A progress bar on stderr (stdout may be the export itself, or JSON)."""
    # No markup: a description names a thread or a file, and "[/x]" in one is not a style.
    bar = Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        console=PlainConsole(stderr=True),
        disable=quiet,
    )
    with bar:
        yield bar


@click.command("export")
@click.argument("thread_id", metavar="THREAD")
@click.option(
    "-o",
    "--output",
    "path",
    type=click.Path(dir_okay=False, writable=True),
    help="The file to write (default: stdout).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@store_option()
@common_options
def export(
    thread_id: str, path: str | None, quiet: bool, store_url: str | None, as_json: bool, debug: bool
) -> None:
    """Write a thread's whole history (every branch) as JSON Lines."""

    async def work() -> int:
        store = open_url(store_url)
        try:
            records = await export_thread(store, thread_id)
        finally:
            await store.aclose()
        sink = open(path, "wb") if path else sys.stdout.buffer  # noqa: SIM115 - closed below
        try:
            with progress(quiet or path is None) as bar:
                task = bar.add_task(f"export {thread_id}", total=len(records))
                for record in records:
                    sink.write(orjson.dumps(record) + b"\n")
                    bar.advance(task)
        finally:
            if path:
                sink.close()
            else:
                sink.flush()
        return len(records)

    count = run_async(debug, work)
    if path:
        _done(
            as_json,
            {"thread_id": thread_id, "records": count, "file": path},
            f"exported thread {thread_id}: {count} records to {path}",
        )


def _done(as_json: bool, data: dict[str, Any], text: str) -> None:
    """Say what a command did: ``data`` as JSON, or ``text`` for people."""
    if as_json:
        Output(True).json(data)
    else:
        click.echo(text)


def _read_export(path: Path, bar: Progress) -> list[Any]:
    raw = path.read_bytes()
    if raw.lstrip().startswith(b"["):
        try:
            records: list[Any] = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise CommandError(f"{path} is not a JSON array: {e}; export again") from e
        return records
    lines = raw.splitlines()
    task = bar.add_task(f"read {path.name}", total=len(lines))
    records = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError as e:
                raise CommandError(
                    f"{path}:{number}: not a JSON record ({e}); an export holds one JSON "
                    f"object a line, as `nodestep export` writes"
                ) from e
        bar.advance(task)
    return records


@click.command("import")
@click.argument(
    "path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@store_option()
@common_options
def import_(path: Path, quiet: bool, store_url: str | None, as_json: bool, debug: bool) -> None:
    """Store an exported thread (JSON Lines from `nodestep export`) as a new thread."""

    async def work() -> tuple[str, int]:
        with progress(quiet) as bar:
            records = _read_export(path, bar)
            if not records:
                raise CommandError(f"{path} holds no records; export the thread again")
            store = open_url(store_url, create=True)
            try:
                task = bar.add_task("store", total=1)
                thread_id = await import_thread(store, records)
                bar.advance(task)
            finally:
                await store.aclose()
        return thread_id, len(records)

    thread_id, count = run_async(debug, work)
    _done(
        as_json,
        {"thread_id": thread_id, "records": count, "file": str(path)},
        f"imported thread {thread_id}: {count} records from {path}",
    )


@click.command("prune")
@click.argument("thread_id", metavar="[THREAD]", required=False)
@click.option(
    "--keep-last",
    # From 1, as prune takes it: a branch keeps its last record, so it still loads.
    type=click.IntRange(min=1),
    help="Keep at least each branch's last N events.",
)
@click.option(
    "--older-than",
    help="Drop what precedes each branch's last checkpoint before "
    "this time (ISO 8601 or epoch seconds).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@store_option()
@common_options
def prune(
    thread_id: str | None,
    keep_last: int | None,
    older_than: str | None,
    quiet: bool,
    store_url: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Drop old history of a thread (or of every thread), keeping every branch loadable.

    Each branch is cut at a checkpoint, so it still loads, runs and forks from there.
    """
    if keep_last is None and older_than is None:
        raise click.UsageError("give --keep-last N, --older-than TIME, or both")
    before = parse_time(older_than, "--older-than")

    async def work() -> tuple[int, int]:
        store = open_url(store_url)
        try:
            if thread_id is not None:
                if not await store.last_sequence(thread_id, "main"):  # a typo is no success
                    raise CommandError(
                        f"thread {thread_id!r} has no records; nothing was pruned "
                        f"(`nodestep threads` lists the threads)"
                    )
                ids = [thread_id]
            else:
                ids = await _all_threads(store)
            dropped = 0
            with progress(quiet) as bar:
                task = bar.add_task("prune", total=len(ids))
                for one in ids:  # a thread at a time: the bar moves, and a stop keeps it done
                    dropped += await store.prune(one, keep_last=keep_last, older_than=before)
                    bar.advance(task)
        finally:
            await store.aclose()
        return len(ids), dropped

    count, dropped = run_async(debug, work)
    _done(
        as_json,
        {"threads": count, "dropped": dropped},
        f"pruned {count} thread(s): {dropped} event(s) dropped",
    )


async def _all_threads(store: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(limit=500, cursor=cursor)
        ids.extend(t.thread_id for t in page.threads)
        cursor = page.next_cursor
        if cursor is None:
            return ids


TRANSFER_COMMANDS = [export, import_, prune]
