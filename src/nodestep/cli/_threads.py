"""The commands that read and manage stored threads: threads, history, show, branches,
fork, delete and prune. They need only the store; ``show`` and ``fork`` take ``--graph``
for what only the graph knows (its reducers fold the events after a checkpoint).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, get_args

import click
from rich.table import Table

from nodestep.cli._common import (
    CommandError,
    Output,
    common_options,
    open_url,
    parse_time,
    run_async,
    shell,
    store_option,
)
from nodestep.cli._events import describe, short, when
from nodestep.cli._target import load_target, target_graph
from nodestep.store import BranchRecord, Record, StateStore, ThreadStatus, status_after

__all__ = ["THREAD_COMMANDS", "full_id", "resolve_at"]

_STATUSES = get_args(ThreadStatus)


@click.command("threads")
@store_option()
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(_STATUSES),
    help="Only threads in this status (repeat for several).",
)
@click.option("--updated-after", help="Only threads active at or after this time.")
@click.option("--updated-before", help="Only threads last active before this time.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="The most threads on a page.",
)
@click.option("--cursor", help="The next page: the cursor the previous page printed.")
@common_options
def threads(
    store_url: str | None,
    statuses: tuple[str, ...],
    updated_after: str | None,
    updated_before: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """List the store's threads, most recent activity first."""
    after = parse_time(updated_after, "--updated-after")
    before = parse_time(updated_before, "--updated-before")
    out = Output(as_json)

    async def work() -> None:
        store = open_url(store_url)
        try:
            page = await store.list_threads(
                status=list(statuses) or None,  # type: ignore[arg-type]
                active_after=after,
                active_before=before,
                limit=limit,
                cursor=cursor,
            )
        finally:
            await store.aclose()
        if out.as_json:
            out.json(
                {
                    "threads": [
                        {
                            "thread_id": t.thread_id,
                            "status": t.status,
                            "created_at": t.created_at,
                            "updated_at": t.updated_at,
                            "last_sequence": t.last_sequence,
                        }
                        for t in page.threads
                    ],
                    "next_cursor": page.next_cursor,
                }
            )
            return
        table = Table("thread", "status", "events", "created (UTC)", "updated (UTC)")
        for t in page.threads:
            table.add_row(
                t.thread_id, t.status, str(t.last_sequence), when(t.created_at), when(t.updated_at)
            )
        out.print(table)
        if page.next_cursor:
            out.print(f"more: nodestep threads --cursor {page.next_cursor}")

    run_async(debug, work)


async def _records(store: StateStore, thread_id: str, branch: str) -> list[Record]:
    records = await store.read(thread_id, branch)
    if not records:
        where = "" if branch == "main" else f" on branch {branch!r}"
        raise CommandError(
            f"thread {thread_id!r} has no history{where}; list the threads with "
            f"`nodestep threads`"
            + (
                ""
                if branch == "main"
                else f" and its branches with `nodestep branches {shell(thread_id)}`"
            )
        )
    return records


async def resolve_at(
    store: StateStore,
    thread_id: str,
    branch: str | None,
    at: str | None,
    option: str = "--branch",
) -> tuple[str, list[Record], int]:
    """Return the branch, its records, and the index of the record ``--at`` names.

    ``at`` is an event id (or its first characters, as ``history`` shows them), a
    sequence number on ``branch`` (``main`` by default), or ``None`` for the branch's
    last record. Digits alone are a sequence number; when the branch has no such number,
    the start of an event id (a short id can be all digits, such as ``03704185``).
    ``option`` is the command's option that gives ``branch``, which the errors name
    (``fork`` takes it as ``--from-branch``: its ``--branch`` names the new branch).
    """
    given = branch
    if at is not None and not at.isdigit():
        at = await full_id(store, thread_id, at)
        found = await store.locate(thread_id, at)
        if found is None:
            raise CommandError(
                f"thread {thread_id!r} has no event {at!r}; take an event id (or a sequence "
                f"number) from `nodestep history {shell(thread_id)}`"
            )
        if branch is not None and found[0] != branch:
            raise CommandError(
                f"event {at!r} is on branch {found[0]!r}, not {branch!r}; drop {option} or "
                f"write {option} {shell(found[0])}"
            )
        branch = found[0]
    branch = branch or "main"
    records = await _records(store, thread_id, branch)
    if at is None:
        return branch, records, len(records) - 1
    key = "seq" if at.isdigit() else "id"
    wanted: Any = int(at) if at.isdigit() else at
    for i, record in enumerate(records):
        if record[key] == wanted:
            return branch, records, i
    if key == "seq" and (whole := await full_id(store, thread_id, at)) != at:
        return await resolve_at(store, thread_id, given, whole, option)
    first, last = records[0]["seq"], records[-1]["seq"]
    why = ""
    # A fork's own events start after its fork point; a branch whose first event is 1 has
    # lost none (--at 0 is just out of range).
    if key == "seq" and wanted < first and first > 1:
        fork = next((b for b in await store.list_branches(thread_id) if b.id == branch), None)
        if fork is not None and first == fork.from_sequence + 1:
            why = (
                f" (it was forked from branch {fork.parent_id!r} after event "
                f"{fork.from_sequence}: give {option} {shell(fork.parent_id)} for the events "
                f"before)"
            )
        else:
            why = " (older ones were pruned)"
    raise CommandError(
        f"branch {branch!r} of thread {thread_id!r} has no event {at}: its sequence numbers "
        f"run from {first} to {last}{why}"
    )


async def full_id(store: StateStore, thread_id: str, at: str) -> str:
    """Return the event id ``at`` begins, when it is a short id (``history`` prints 8 chars).

    Why a scan and not the store: ``locate`` takes whole ids; a prefix is a person's
    shorthand, read once per command, so reading the thread's branches is cheap enough.
    """
    if len(at) >= 36 or len(at) < 4:
        return at  # a whole id, or too short to be a prefix worth guessing
    branches = ["main", *(b.id for b in await store.list_branches(thread_id))]
    ids = {r["id"] for b in branches for r in await store.read(thread_id, b)}
    matches = sorted(i for i in ids if i.startswith(at))
    if len(matches) > 1:
        raise CommandError(
            f"{at!r} begins {len(matches)} events of thread {thread_id!r} "
            f"({', '.join(matches[:3])}); give more of the id"
        )
    return matches[0] if matches else at


@click.command("history")
@click.argument("thread_id", metavar="THREAD")
@click.option("--branch", default="main", show_default=True, help="The branch to list.")
@store_option()
@common_options
def history(thread_id: str, branch: str, store_url: str | None, as_json: bool, debug: bool) -> None:
    """List a thread's events: seq, time, kind, node and what changed."""
    out = Output(as_json)

    async def work() -> None:
        store = open_url(store_url)
        try:
            records = await _records(store, thread_id, branch)
        finally:
            await store.aclose()
        if out.as_json:
            out.json(records)
            return
        table = Table(title=f"thread {thread_id}, branch {branch}")
        table.add_column("seq", justify="right", no_wrap=True)
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("node")
        table.add_column("what changed", ratio=1)
        # What --at takes: the id's first characters (--json has it whole), or the seq.
        table.add_column("event", no_wrap=True)
        for r in records:
            node, what = describe(r)
            table.add_row(str(r["seq"]), when(r["ts"]), r["type"], node, what, r["id"][:8])
        out.print(table)

    run_async(debug, work)


def _pending(records: list[Record]) -> list[dict[str, Any]]:
    """The interrupts waiting for answers after the last of ``records``."""
    pending: list[dict[str, Any]] = []
    for r in records:
        if r["type"] in ("run_paused", "run_started", "checkpoint"):
            held = r.get("interrupts", [])  # a resume (run_started) answers every one
            pending = list(held.values() if isinstance(held, dict) else held)
    return pending


def _failure(records: list[Record]) -> dict[str, Any] | None:
    """The failure the thread stands at: its last run failed, and none started since.

    A branch forked where a run failed opens with a checkpoint that holds the failure
    (its ``failure`` key) instead of the ``run_failed`` record, which is its parent's.
    """
    for r in reversed(records):
        if r["type"] == "run_failed":
            return {"error": r.get("error"), "message": r.get("message"), "node": r.get("node")}
        if r["type"] in ("run_started", "run_completed", "run_paused"):
            return None
        if r["type"] == "checkpoint" and isinstance(failure := r.get("failure"), dict):
            return {k: failure.get(k) for k in ("error", "message", "node")}
    return None


def _status(records: list[Record]) -> str:
    status: Any = None
    for r in records:
        status = status_after(status, r)
    return str(status or "completed")


def _state_from_store(records: list[Record]) -> tuple[dict[str, Any], int, int]:
    """The state of the last checkpoint in ``records``, its seq, and the events after it."""
    checkpoints = [i for i, r in enumerate(records) if r["type"] == "checkpoint"]
    last = checkpoints[-1]  # every branch, pruned or forked, starts with one
    return dict(records[last].get("values", {})), records[last]["seq"], len(records) - last - 1


async def _show_with_graph(
    target: str, store: StateStore, thread_id: str, branch: str, event_id: str
) -> dict[str, Any]:
    graph = target_graph(load_target(target))
    snapshot = await graph.get_state(thread_id, event_id, branch_id=branch, state_store=store)
    value = snapshot.value
    state = value.model_dump(mode="json") if hasattr(value, "model_dump") else dict(value)
    return {
        "state": state,
        "position": snapshot.status,  # the engine's word: idle, running, paused, failed, ...
        "next": list(snapshot.next),
        "interrupts": [i.to_json() for i in snapshot.interrupts.values()],
        "error": None
        if snapshot.error_type is None
        else {
            "error": snapshot.error_type,
            "message": snapshot.error_message,
            "node": snapshot.failed_node,
        },
    }


@click.command("show")
@click.argument("thread_id", metavar="THREAD")
@click.option(
    "--at",
    metavar="EVENT",
    help="An event id, or a sequence number on --branch (default: the last).",
)
@click.option("--branch", help="The branch (default: main, or the branch of --at's event).")
@click.option(
    "--graph",
    "graph_target",
    envvar="NODESTEP_GRAPH",
    metavar="MODULE:GRAPH",
    help="The thread's graph: its reducers give the exact state at any event.",
)
@store_option()
@common_options
def show(
    thread_id: str,
    at: str | None,
    branch: str | None,
    graph_target: str | None,
    store_url: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Show a thread's state, status and pending interrupts at an event."""
    out = Output(as_json)

    async def work() -> None:
        store = open_url(store_url)
        try:
            name, records, index = await resolve_at(store, thread_id, branch, at)
            upto = records[: index + 1]
            event = upto[-1]
            shown: dict[str, Any] = {
                "thread_id": thread_id,
                "branch": name,
                "event": event["id"],
                "sequence": event["seq"],
                "status": _status(upto),  # as `threads` says it: completed, paused, unfinished
            }
            if graph_target:
                shown |= await _show_with_graph(graph_target, store, thread_id, name, event["id"])
                shown["state_at"] = event["seq"]
            else:
                state, seq, later = _state_from_store(upto)
                shown |= {
                    "state": state,
                    "error": _failure(upto),
                    "interrupts": _pending(upto),
                    "state_at": seq,
                    "events_after_state": later,
                }
        finally:
            await store.aclose()
        _print_show(out, shown)

    run_async(debug, work)


def _print_show(out: Output, shown: dict[str, Any]) -> None:
    if out.as_json:
        out.json(shown)
        return
    out.print(
        f"thread {shown['thread_id']}, branch {shown['branch']}, event "
        f"{shown['sequence']} ({shown['event']})"
    )
    position = shown.get("position", shown["status"])
    position = "" if position == shown["status"] else f" (the engine's position: {position})"
    out.print(f"status: {shown['status']}{position}")
    later = shown.get("events_after_state", 0)
    if later:
        out.print(
            f"state: as of the checkpoint at event {shown['state_at']}; {later} later "
            f"event(s) change it: pass --graph MODULE:GRAPH for the state at "
            f"{shown['sequence']}"
        )
    table = Table("field", "value")
    for field, value in shown["state"].items():
        table.add_row(field, short(value, 200))
    out.print(table)
    if shown["error"]:
        failed = shown["error"]
        where = f" in node {failed['node']}" if failed.get("node") else ""
        out.print(f"failed{where}: {failed['error']}: {failed['message']}")
    for i in shown["interrupts"]:
        out.print(f"waiting: {i['key']} (node {i['node']}) asks {short(i['payload'], 200)}")


@click.command("branches")
@click.argument("thread_id", metavar="THREAD")
@store_option()
@common_options
def branches(thread_id: str, store_url: str | None, as_json: bool, debug: bool) -> None:
    """List a thread's forked branches, oldest first."""
    out = Output(as_json)

    async def work() -> None:
        store = open_url(store_url)
        try:
            await _records(store, thread_id, "main")
            found = await store.list_branches(thread_id)
        finally:
            await store.aclose()
        if out.as_json:
            out.json([b.to_json() for b in found])
            return
        table = Table(
            "branch",
            "forked from",
            "at seq",
            "at event",
            "created (UTC)",
            title=f"branches of thread {thread_id}",
        )
        for b in found:
            table.add_row(
                b.id, b.parent_id, str(b.from_sequence), b.from_event_id, when(b.created_at)
            )
        out.print(table)

    run_async(debug, work)


async def _fork_at_checkpoint(
    store: StateStore, thread_id: str, parent: str, event: Record, name: str | None
) -> BranchRecord:
    """Fork at a stored checkpoint: the branch opens with a copy of it, as a graph's would."""
    if event["type"] != "checkpoint":
        raise CommandError(
            f"event {event['seq']} of branch {parent!r} is a {event['type']}, not a "
            f"checkpoint: give --graph MODULE:GRAPH so its reducers can rebuild the state "
            f"there, or fork at a checkpoint (`nodestep history {shell(thread_id)}` shows them)"
        )
    branch_id = name or uuid.uuid4().hex[-12:]
    now = datetime.now(UTC).timestamp()
    record = BranchRecord(branch_id, thread_id, parent, event["id"], event["seq"], now)
    # A copy of the checkpoint, but not its "migration" mark: the branch's opening is a
    # fork's, as the engine's fork writes it (provenance and diff find the fork point).
    first = {k: v for k, v in event.items() if k != "migration"} | {
        "id": str(uuid.uuid4()),
        "seq": event["seq"] + 1,
        "ts": now,
        "branch": branch_id,
    }
    if not await store.create_branch(record, [first]):
        raise CommandError(
            f"thread {thread_id!r} already has a branch {branch_id!r}; choose another --branch"
        )
    return record


@click.command("fork")
@click.argument("thread_id", metavar="THREAD")
@click.option(
    "--at",
    metavar="EVENT",
    required=True,
    help="The event to fork at: its id, or a sequence number on --from-branch.",
)
@click.option("--branch", "name", help="The new branch's name (default: a random id).")
@click.option("--from-branch", help="The branch --at's sequence number counts on (default: main).")
@click.option(
    "--graph",
    "graph_target",
    envvar="NODESTEP_GRAPH",
    metavar="MODULE:GRAPH",
    help="The thread's graph; without it, --at must be a checkpoint.",
)
@store_option()
@common_options
def fork(
    thread_id: str,
    at: str,
    name: str | None,
    from_branch: str | None,
    graph_target: str | None,
    store_url: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Start a new branch of a thread at an event; the original is left unchanged."""
    out = Output(as_json)
    if name is not None and (not name.strip() or name == "main"):
        raise click.BadParameter(
            f"{name!r}: a branch name is not blank and not 'main'", param_hint="--branch"
        )

    async def work() -> None:
        store = open_url(store_url)
        try:
            parent, records, index = await resolve_at(
                store, thread_id, from_branch, at, "--from-branch"
            )
            event = records[index]
            if graph_target:
                graph = target_graph(load_target(graph_target))
                made = await graph.fork(
                    thread_id, from_=event["id"], name=name, branch_id=parent, state_store=store
                )
            else:
                made = await _fork_at_checkpoint(store, thread_id, parent, event, name)
        finally:
            await store.aclose()
        if out.as_json:
            out.json(made.to_json())
            return
        out.print(
            f"branch {made.id} of thread {thread_id}: forked from {made.parent_id} at "
            f"event {made.from_sequence} ({made.from_event_id[:8]})"
        )
        out.print(f"see it: nodestep show {shell(thread_id)} --branch {shell(made.id)}")

    run_async(debug, work)


@click.command("delete")
@click.argument("thread_id", metavar="THREAD")
@click.option("--yes", is_flag=True, help="Do not ask first.")
@store_option()
@common_options
def delete(thread_id: str, yes: bool, store_url: str | None, as_json: bool, debug: bool) -> None:
    """Delete a thread: every record and branch of it."""
    if not yes:
        click.confirm(f"Delete thread {thread_id!r} and all its branches?", abort=True, err=True)

    async def work() -> bool:
        store = open_url(store_url)
        try:
            return await store.delete_thread(thread_id)
        finally:
            await store.aclose()

    deleted = run_async(debug, work)
    if not deleted:
        raise CommandError(f"thread {thread_id!r} has no records; nothing was deleted")
    if as_json:
        Output(True).json({"thread_id": thread_id, "deleted": True})
    else:
        click.echo(f"deleted thread {thread_id}")


THREAD_COMMANDS = [threads, history, show, branches, fork, delete]
