"""Thread management: what a store says about its threads, and the rules every store shares.

``StateStore.list_threads`` returns ``ThreadInfo`` pages; ``delete_thread`` and ``prune``
drop history. The rules (a thread's status, the order and paging of a listing, where prune
cuts a branch) are written once here, so that every back end, the SQL ones too, answers
alike; the conformance suite holds them to it. ``docs/threads.md`` states them for users
and for store authors.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import orjson

from nodestep._errors import GraphConfigError
from nodestep._numbers import is_finite_number, shown_number

__all__ = [
    "ThreadInfo",
    "ThreadPage",
    "ThreadStatus",
    "check_listing",
    "check_prune",
    "decode_cursor",
    "encode_cursor",
    "page_threads",
    "prune_cut",
    "status_after",
]

Record = dict[str, Any]  # _contract.Record; not imported, as _contract imports this module

ThreadStatus = Literal["completed", "paused", "unfinished"]
"""``completed``: no superstep pending. ``paused``: waiting for answers to interrupts.
``unfinished``: a run is going on, or stopped or failed in a superstep it can continue."""

_STATUSES: tuple[str, ...] = get_args(ThreadStatus)

# What a record of the main branch says about the thread; a type not here changes nothing
# (``state_updated`` edits values, not where the thread stands, unless ``_plans`` says so).
_BY_TYPE: dict[str, ThreadStatus] = {
    "run_completed": "completed",
    "run_paused": "paused",
    "run_started": "unfinished",
    "task_finished": "unfinished",
    "superstep_completed": "unfinished",
    "run_failed": "unfinished",
    "run_stopped": "unfinished",
}
# A checkpoint's ``status`` is the engine's position status (``_superstep.position``).
_BY_POSITION: dict[str, ThreadStatus] = {
    "idle": "completed",
    "paused": "paused",
    "running": "unfinished",
    "failed": "unfinished",
    "blocked": "unfinished",
}


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread of a store, as ``list_threads`` gives it.

    Attributes:
        thread_id: The thread.
        status: Where its ``main`` branch stands: ``"completed"``, ``"paused"`` or
            ``"unfinished"`` (see ``docs/threads.md`` for the rules).
        created_at: The smallest ``ts`` of the thread's records still stored.
        updated_at: The largest ``ts`` of its records, on any branch: its last activity.
        last_sequence: The sequence number of the ``main`` branch's last record.
    """

    thread_id: str
    status: ThreadStatus
    created_at: float
    updated_at: float
    last_sequence: int


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """One page of ``list_threads``.

    Attributes:
        threads: The threads, most recent activity first (ties by thread id).
        next_cursor: Pass it as ``cursor=`` for the next page; ``None`` on the last page.
    """

    threads: list[ThreadInfo]
    next_cursor: str | None

    def __repr__(self) -> str:
        count = f"{len(self.threads):,} thread{'' if len(self.threads) == 1 else 's'}"
        return f"ThreadPage({count}, next_cursor={self.next_cursor!r})"


def status_after(previous: ThreadStatus | None, record: Record) -> ThreadStatus | None:
    """Return a thread's status after its ``main`` branch's record ``record``."""
    kind = record.get("type")
    if kind == "checkpoint":
        position = record.get("status")  # a damaged record's may be anything
        return _BY_POSITION.get(position, previous) if type(position) is str else previous
    if kind == "state_updated":
        # With ``as_node=`` on a completed thread, the node's routes may plan a superstep,
        # which ``invoke(None)`` then runs: the thread is unfinished, as its position says.
        return "unfinished" if _plans(record.get("routes")) else previous
    return _BY_TYPE.get(kind, previous) if type(kind) is str else previous


def _plans(routes: object) -> bool:
    """Tell whether the ``routes`` of an ``update_state(as_node=...)`` plan a task.

    The position is idle then (no join has arrivals, no route is held), so a task comes
    from a node's name, a ``Send``, a route held for a deferred node (nothing else is left
    to run), or a join all of whose sources arrive in these routes: what
    ``_superstep.barriers.plan_held`` does. A damaged record's routes plan nothing.
    """
    if type(routes) is not list:
        return False
    arrived: dict[str, set[str]] = {}
    joins: list[tuple[str, list[str]]] = []
    for route in routes:
        if type(route) is str:
            return True
        if type(route) is not dict:
            continue
        if "join" not in route:  # a Send, or a route held for a deferred node
            return True
        join, source, after = route.get("join"), route.get("from"), route.get("after")
        if (
            type(join) is str
            and type(source) is str
            and type(after) is list
            and all(type(name) is str for name in after)
        ):
            arrived.setdefault(join, set()).add(source)
            joins.append((join, after))
    return any(arrived[join].issuperset(after) for join, after in joins)


def encode_cursor(info: ThreadInfo) -> str:
    """Return the cursor of the page that follows ``info`` (an opaque string)."""
    raw = orjson.dumps([info.updated_at, info.thread_id])
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """Return the ``(updated_at, thread_id)`` key a cursor from ``encode_cursor`` holds.

    Raises:
        GraphConfigError: ``cursor`` is not such a cursor.
    """
    try:
        updated, thread = orjson.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        if isinstance(updated, int | float) and isinstance(thread, str):
            return float(updated), thread
    except (ValueError, TypeError, AttributeError, UnicodeError, binascii.Error):
        pass
    raise GraphConfigError(
        f"list_threads got cursor={cursor!r}, which is not a cursor a listing gave. Pass the "
        f"next_cursor of the previous page, or None for the first page."
    )


def check_listing(
    status: ThreadStatus | Sequence[ThreadStatus] | None,
    active_after: float | None,
    active_before: float | None,
    limit: int,
) -> frozenset[str] | None:
    """Check the arguments of ``list_threads``; return the statuses asked for (``None``: all).

    Raises:
        GraphConfigError: An argument is out of range; the message names it.
    """
    wanted = None if status is None else frozenset([status] if isinstance(status, str) else status)
    if wanted is not None and (unknown := sorted(wanted - set(_STATUSES), key=repr)):
        raise GraphConfigError(
            f"list_threads got status {unknown[0]!r}, which is not a thread status; use "
            f"{', '.join(map(repr, _STATUSES))}, a list of them, or None for all."
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise GraphConfigError(
            f"list_threads got limit={limit!r}; give a whole number of threads, 1 or more."
        )
    for name, value in (("active_after", active_after), ("active_before", active_before)):
        _check_time("list_threads", name, value)
    return wanted


def page_threads(
    infos: Iterable[ThreadInfo],
    *,
    status: ThreadStatus | Sequence[ThreadStatus] | None = None,
    active_after: float | None = None,
    active_before: float | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> ThreadPage:
    """Filter, order and cut ``infos`` into one page, as ``list_threads`` does.

    For stores that hold their threads' infos in memory; a database does the same in its
    query (``WHERE``, ``ORDER BY updated_at DESC, thread_id``, ``LIMIT limit + 1``).

    Raises:
        GraphConfigError: An argument is out of range, or ``cursor`` is not a cursor.
    """
    wanted = check_listing(status, active_after, active_before, limit)
    after = None if cursor is None else decode_cursor(cursor)
    chosen = [
        info
        for info in infos
        if (wanted is None or info.status in wanted)
        and (active_after is None or info.updated_at >= active_after)
        and (active_before is None or info.updated_at < active_before)
        and (after is None or (-info.updated_at, info.thread_id) > (-after[0], after[1]))
    ]
    chosen.sort(key=lambda info: (-info.updated_at, info.thread_id))
    page = chosen[:limit]
    more = len(chosen) > limit
    return ThreadPage(page, encode_cursor(page[-1]) if more else None)


def check_prune(keep_last: int | None, older_than: float | None) -> None:
    """Check the arguments of ``prune``.

    Raises:
        GraphConfigError: Neither rule is given, or one is out of range.
    """
    if keep_last is None and older_than is None:
        raise GraphConfigError(
            "prune needs keep_last=N (keep at least each branch's last N records) or "
            "older_than=T (drop records older than the time.time() timestamp T), or both."
        )
    if keep_last is not None and (
        isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
    ):
        raise GraphConfigError(
            f"prune got keep_last={keep_last!r}; give a whole number of records, 1 or more "
            f"(the last record is always kept, so a branch can be loaded)."
        )
    _check_time("prune", "older_than", older_than)


def prune_cut(
    last_seq: int,
    checkpoints: Sequence[tuple[int, float]],
    keep_last: int | None,
    older_than: float | None,
) -> int | None:
    """Return where prune cuts a branch: the ``seq`` of the checkpoint its kept part starts at.

    Records before the returned checkpoint are dropped. With both rules, a record goes only
    when both drop it: the earlier cut wins.

    Args:
        last_seq: The branch's last sequence number.
        checkpoints: The branch's checkpoints still stored, ``(seq, ts)``, oldest first.
        keep_last: Keep at least the last ``keep_last`` records.
        older_than: Drop records before the last checkpoint older than this timestamp.

    Returns:
        The checkpoint's ``seq``, or ``None`` when nothing is dropped.
    """
    cuts: list[int | None] = []
    if keep_last is not None:
        bound = last_seq - keep_last + 1
        cuts.append(max((seq for seq, _ in checkpoints if seq <= bound), default=None))
    if older_than is not None:
        cuts.append(max((seq for seq, ts in checkpoints if ts < older_than), default=None))
    if any(cut is None for cut in cuts):
        return None
    cut = min(c for c in cuts if c is not None)
    first = checkpoints[0][0] if checkpoints else None
    return None if cut == first else cut


def _check_time(call: str, name: str, value: float | None) -> None:
    if value is None:
        return
    if not is_finite_number(value):
        raise GraphConfigError(
            f"{call} got {name}={shown_number(value)}; give a time.time() timestamp (a finite "
            f"number of seconds since the epoch), or None."
        )
