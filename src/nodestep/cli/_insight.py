"""``diff`` and ``provenance``: what differs between two branches of a thread, and who
wrote a field's value. Both read the store alone (``nodestep.history``); ``--graph`` gives
them the state class, which says for certain which fields have a reducer.
"""

from __future__ import annotations

from typing import Any

import click

from nodestep.cli._common import Output, common_options, open_url, run_async, store_option
from nodestep.cli._target import load_target, target_graph
from nodestep.cli._threads import full_id, resolve_at
from nodestep.history import diff as diff_of
from nodestep.history import provenance as provenance_of
from nodestep.store import StateStore

__all__ = ["INSIGHT_COMMANDS"]

_GRAPH_HELP = "The thread's graph: its state class says which fields have a reducer."


def _state(graph_target: str | None) -> Any:
    return None if graph_target is None else target_graph(load_target(graph_target)).state


async def _side(store: StateStore, thread_id: str, text: str) -> str:
    """A side of a diff: a branch id, or an event id (whole, or the short form history shows)."""
    if text == "main" or any(b.id == text for b in await store.list_branches(thread_id)):
        return text
    return await full_id(store, thread_id, text)


@click.command("diff")
@click.argument("thread_id", metavar="THREAD")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option(
    "--graph", "graph_target", envvar="NODESTEP_GRAPH", metavar="MODULE:GRAPH", help=_GRAPH_HELP
)
@store_option()
@common_options
def diff(
    thread_id: str,
    a: str,
    b: str,
    graph_target: str | None,
    store_url: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Compare two branches (or events) of a thread: fork point, fields, events on each side.

    A and B are branch ids (their heads) or event ids.
    """
    out = Output(as_json)

    async def work() -> Any:
        store = open_url(store_url)
        try:
            sides = [await _side(store, thread_id, text) for text in (a, b)]
            return await diff_of(store, thread_id, *sides, state=_state(graph_target))
        finally:
            await store.aclose()

    found = run_async(debug, work)
    if out.as_json:
        out.json(found.to_json())
    else:
        click.echo(str(found))


@click.command("provenance")
@click.argument("thread_id", metavar="THREAD")
@click.argument("field")
@click.option(
    "--at",
    metavar="EVENT",
    help="An event id, or a sequence number on --branch (default: the head).",
)
@click.option("--branch", help="The branch (default: main, or the branch of --at's event).")
@click.option(
    "--graph", "graph_target", envvar="NODESTEP_GRAPH", metavar="MODULE:GRAPH", help=_GRAPH_HELP
)
@store_option()
@common_options
def provenance(
    thread_id: str,
    field: str,
    at: str | None,
    branch: str | None,
    graph_target: str | None,
    store_url: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Say which event, node, run and time wrote a field's value (every write, for a
    field with a reducer)."""
    out = Output(as_json)

    async def work() -> Any:
        store = open_url(store_url)
        try:
            name, records, index = await resolve_at(store, thread_id, branch, at)
            return await provenance_of(
                store,
                thread_id,
                field,
                at=records[index]["id"],
                branch_id=name,
                state=_state(graph_target),
            )
        finally:
            await store.aclose()

    found = run_async(debug, work)
    if out.as_json:
        out.json(found.to_json())
    else:
        click.echo(str(found))


INSIGHT_COMMANDS: list[click.Command] = [diff, provenance]
