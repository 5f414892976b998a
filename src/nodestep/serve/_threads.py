"""Threads: create, read, search, copy and delete them; read and edit their state.

A thread's row (metadata, status, the branch it shows) is the server's; its history is the
store's, written by runs and ``update_state``. A thread that never ran has a row and no
history: its state is empty until its first run.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodestep import Graph, NodestepError
from nodestep.serve._bodies import (
    ApiError,
    HistoryQuery,
    StateUpdate,
    Superstep,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    ThreadTTL,
    check_select,
    parse,
    query_count,
    read_json,
    thread_uuid,
)
from nodestep.serve._registry import ThreadRow
from nodestep.serve._service import Service
from nodestep.serve._shapes import checkpoint_of, from_lc_messages, iso, page_headers
from nodestep.serve._views import history_json, thread_state
from nodestep.store import BranchRecord

__all__ = ["routes", "thread_json"]


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


_FIELDS = (
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "status",
    "config",
    "values",
    "interrupts",
    "error",
    "branch_id",
)
"""The fields of a thread, in the order shown; ``threads.search(select=...)`` picks some."""


async def thread_json(
    service: Service, row: ThreadRow, select: list[str] | None = None
) -> dict[str, Any]:
    """Return a thread as ``threads.get`` shows it, with its values and interrupts.

    ``select``: only these fields; the state is read only when one of them shows it.
    """
    if select is not None and not {"values", "interrupts"} & set(select):
        state: dict[str, Any] = {"values": {}, "tasks": []}
    else:
        state = await thread_state(service.graph_of(row), service.store, row)
    interrupts = {t["id"]: t["interrupts"] for t in state["tasks"] if t["interrupts"]}
    shown = {
        "thread_id": row.thread_id,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "state_updated_at": iso(row.updated_at),
        "metadata": row.metadata,
        "status": row.status,
        "config": {},
        "values": state["values"],
        "interrupts": interrupts,
        "error": row.error,
        "branch_id": row.branch,
    }
    return shown if select is None else {k: shown[k] for k in _FIELDS if k in select}


async def _create(request: Request) -> Response:
    service = _service(request)
    body = parse(ThreadCreate, await read_json(request, service.limits.max_depth))
    thread_id = thread_uuid(body.thread_id) if body.thread_id else str(uuid.uuid4())
    now = time.time()
    expires = _expiry(service, body.ttl)
    row = ThreadRow(thread_id, now, now, dict(body.metadata or {}), expires_at=expires)
    graph = _superstep_graph(service, row, body.supersteps) if body.supersteps else None
    created = False

    await service.registry.load()
    if (existing := service.registry.threads.get(thread_id)) is not None:
        await service.expire(existing)  # an expired thread's id is free again

    def create() -> list[ThreadRow]:
        nonlocal row, created
        existing = service.registry.threads.get(thread_id)
        created = existing is None
        if existing is None:
            return [row]
        if body.if_exists != "do_nothing":
            raise ApiError(409, f"Thread {thread_id!r} already exists.")
        row = existing
        return []

    await service.registry.update(create)
    # Only a thread this request made gets the supersteps: a create retried with
    # if_exists="do_nothing" must not apply them twice.
    if graph is not None and body.supersteps and created:
        row = await _apply_supersteps(service, graph, row, body.supersteps)
    return JSONResponse(await thread_json(service, row))


def _superstep_graph(service: Service, row: ThreadRow, supersteps: list[Superstep]) -> Graph[Any]:
    """Return the graph whose state a new thread's ``supersteps`` edit.

    Raises:
        ApiError: 422, the metadata names no served graph, or an update sends a command.
    """
    graph = service.graph_of(row)
    if graph is None:
        raise ApiError(
            422,
            f"supersteps edit a graph's state, and the thread's metadata graph_id is "
            f"{row.metadata.get('graph_id')!r}, which is no served graph; send graph_id "
            f"(graphId in the JS client) as one of: {', '.join(sorted(service.graphs))}.",
        )
    if any(update.command is not None for step in supersteps for update in step.updates):
        raise ApiError(
            422,
            "A superstep update with a command is not served: send the state it leaves as "
            "values, with as_node naming the node that wrote them.",
        )
    return graph


async def _apply_supersteps(
    service: Service, graph: Graph[Any], row: ThreadRow, supersteps: list[Superstep]
) -> ThreadRow:
    """Write a new thread's history: each update of each superstep, in order, is an
    ``update_state`` (as node ``as_node``); return the row with the status they leave.

    Why all or nothing: a thread holding part of the history it was sent would read as a
    copy that worked, so an edit the graph refuses deletes the thread, and the error
    answers the request.
    """
    try:
        for step in supersteps:
            for update in step.updates:
                await graph.update_state(
                    row.thread_id,
                    from_lc_messages(update.values or {}),
                    create=True,
                    as_node=update.as_node,
                    state_store=service.store,
                )
    except NodestepError:
        await graph.delete_thread(row.thread_id, state_store=service.store)
        await service.registry.write(("thread", row.thread_id))
        raise
    snapshot = await graph.get_state(row.thread_id, state_store=service.store)
    shown = "interrupted" if snapshot.next else "idle"
    await service.registry.update(lambda: _touched(service, row, shown))
    return service.registry.threads.get(row.thread_id) or row


def _expiry(service: Service, ttl: ThreadTTL | float | None) -> float | None:
    """Return when a thread given ``ttl`` now expires (``None``: kept until deleted).

    Raises:
        ApiError: 422, the strategy ``keep_latest``, or not a finite number above 0.
    """
    if ttl is None:
        return None
    minutes, strategy = (ttl.ttl, ttl.strategy) if isinstance(ttl, ThreadTTL) else (ttl, "delete")
    if strategy != "delete":
        raise ApiError(
            422,
            f"ttl strategy {strategy!r} is not served: a nodestep thread past its ttl is "
            f"deleted. Send strategy 'delete', or drop old history and keep the thread "
            f"with `nodestep threads prune --keep-last N` on the store.",
        )
    if not (minutes > 0 and math.isfinite(minutes * 60.0)):
        raise ApiError(
            422,
            f"ttl takes minutes, a number above 0 (or null: kept until deleted); got {minutes!r}.",
        )
    return service.clock() + minutes * 60.0


async def _get(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    return JSONResponse(await thread_json(service, row))


async def _patch(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    body = parse(ThreadPatch, await read_json(request, service.limits.max_depth))
    expires = _expiry(service, body.ttl)
    changed = row

    def patch() -> list[ThreadRow]:
        nonlocal changed
        now = service.registry.threads.get(row.thread_id)
        if now is None:
            raise ApiError(404, f"Thread {row.thread_id!r} not found.")
        metadata = now.metadata | (body.metadata or {})
        expires_at = now.expires_at if expires is None else expires
        changed = replace(now, metadata=metadata, expires_at=expires_at, updated_at=time.time())
        return [changed]

    await service.registry.update(patch)
    return JSONResponse(await thread_json(service, changed))


async def _delete(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    for run in service.registry.active_runs(row.thread_id):
        service.executor.cancel(run.run_id)
    graph = service.graph_of(row)
    if graph is not None:
        await graph.delete_thread(row.thread_id, state_store=service.store)
    await service.registry.write(("thread", row.thread_id))
    return Response(status_code=204)


def _matches(row: ThreadRow, body: ThreadSearch) -> bool:
    if body.status is not None and row.status != body.status:
        return False
    return all(row.metadata.get(k) == v for k, v in (body.metadata or {}).items())


def _selected(body: ThreadSearch) -> list[str] | None:
    """Return the fields ``select`` asks for, refusing a field a thread does not have."""
    check_select(body.select or (), _FIELDS, "a thread")
    return body.select


async def _found(service: Service, body: ThreadSearch) -> list[ThreadRow]:
    await service.registry.load()
    if body.ids is not None:  # only the threads named, as LangGraph's search takes them
        wanted = {thread_uuid(ident) for ident in body.ids}
        found = (service.registry.threads.get(ident) for ident in wanted)
        rows = [row for row in found if row is not None and _matches(row, body)]
    else:
        rows = [row for row in service.registry.threads.values() if _matches(row, body)]
    rows = [row for row in rows if not await service.expire(row)]
    key = body.sort_by or "created_at"
    rows.sort(key=lambda row: getattr(row, key), reverse=(body.sort_order or "desc") == "desc")
    return rows


_EXTRACTABLE = ("values", "metadata", "config", "interrupts")
_EXTRACT_ALIAS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _extract_paths(body: ThreadSearch) -> dict[str, list[str]]:
    """Return ``extract``'s paths split into their steps (``values.messages[-1].content``
    is ``["values", "messages", "[-1]", "content"]``), as LangGraph's search takes them.

    Raises:
        ApiError: 422, an alias that is not an identifier or is a thread's field, or a
            path that does not start with a field it can read.
    """
    paths: dict[str, list[str]] = {}
    for alias, path in (body.extract or {}).items():
        if not _EXTRACT_ALIAS.match(alias) or alias in _FIELDS:
            raise ApiError(
                422,
                f"extract key {alias!r} must be an identifier (letters, digits, _) and not "
                f"a field of a thread, such as 'last_message'.",
            )
        steps = [step for step in re.split(r"\.|(?=\[)", path) if step]
        if not steps or steps[0] not in _EXTRACTABLE:
            raise ApiError(
                422,
                f"extract path {path!r} (for {alias!r}) must start with one of "
                f"{', '.join(_EXTRACTABLE)}, e.g. 'values.messages[-1].content'.",
            )
        paths[alias] = steps
    return paths


def _extracted(thread: dict[str, Any], steps: list[str]) -> Any:
    """Return the value at a path of ``thread``, ``None`` where it does not lead."""
    current: Any = thread
    for step in steps:
        if step.startswith("[") and step.endswith("]") and isinstance(current, list):
            try:
                current = current[int(step[1:-1])]
            except (ValueError, IndexError):
                return None
        elif isinstance(current, dict) and not step.startswith("["):
            current = current.get(step)
        else:
            return None
    return current


async def _search(request: Request) -> Response:
    service = _service(request)
    body = parse(ThreadSearch, await read_json(request, service.limits.max_depth))
    select = _selected(body)
    extract = _extract_paths(body)
    rows = await _found(service, body)
    if not body.values and not extract:  # only the page's threads need their values read
        paging = page_headers(len(rows), body.offset, body.limit)
        rows = rows[body.offset : body.offset + body.limit]
        shown = [await thread_json(service, row, select) for row in rows]
        return JSONResponse(shown, headers=paging)
    if body.values:
        found = [await thread_json(service, row) for row in rows]
        found = [t for t in found if _holds(t, body.values)]
        total, page = len(found), found[body.offset : body.offset + body.limit]
    else:
        window = rows[body.offset : body.offset + body.limit]
        total, page = len(rows), [await thread_json(service, row) for row in window]
    shown = page if select is None else [{k: t[k] for k in _FIELDS if k in select} for t in page]
    if extract:  # LangGraph's "extracted": the value at each path, None where none is
        for full, thread in zip(page, shown, strict=True):
            thread["extracted"] = {alias: _extracted(full, s) for alias, s in extract.items()}
    return JSONResponse(shown, headers=page_headers(total, body.offset, body.limit))


def _holds(thread: dict[str, Any], values: dict[str, Any]) -> bool:
    """Tell whether a thread's values have these ones (``values`` of a search or count)."""
    return all(thread["values"].get(k) == v for k, v in values.items())


async def _count(request: Request) -> Response:
    service = _service(request)
    body = parse(ThreadSearch, await read_json(request, service.limits.max_depth))
    rows = await _found(service, body)
    if body.values:  # counted as search finds them: by the values the state holds
        found = [await thread_json(service, row, ["values"]) for row in rows]
        return JSONResponse(len([t for t in found if _holds(t, body.values)]))
    return JSONResponse(len(rows))


async def _copy(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    now = time.time()
    copy = ThreadRow(str(uuid.uuid4()), now, now, dict(row.metadata), "idle", row.branch)
    await _copy_history(service, row.thread_id, copy.thread_id)
    await service.registry.write(copy)
    return JSONResponse(await thread_json(service, copy))


async def _copy_history(service: Service, source: str, target: str) -> None:
    """Copy every branch of a thread's history under a new thread id and new event ids."""
    store = service.store
    ids: dict[str, str] = {}

    def moved(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for record in records:
            ids[record["id"]] = str(uuid.uuid4())
        return [r | {"id": ids[r["id"]], "thread": target} for r in records]

    main = await store.read(source, "main")
    if not main:
        return
    await store.append(target, "main", moved(main), after=0)
    for fork in await store.list_branches(source):
        records = moved(await store.read(source, fork.id))
        branch = BranchRecord(
            fork.id, target, fork.parent_id, ids[fork.from_event_id], fork.from_sequence, now()
        )
        await store.create_branch(branch, records)


def now() -> float:
    """Return the time, for the rows and branch records the server writes."""
    return time.time()


async def _state(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    at = request.path_params.get("checkpoint_id")
    return JSONResponse(await thread_state(service.graph_of(row), service.store, row, at))


async def _state_at(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    data = await read_json(request, service.limits.max_depth)
    checkpoint = data.get("checkpoint") if isinstance(data, dict) else None
    at = checkpoint.get("checkpoint_id") if isinstance(checkpoint, dict) else None
    return JSONResponse(await thread_state(service.graph_of(row), service.store, row, at))


async def _update_state(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    body = parse(StateUpdate, await read_json(request, service.limits.max_depth))
    graph = service.graph_of(row)
    if graph is None:
        raise ApiError(
            409, f"Thread {row.thread_id!r} has no graph yet; start a run on it before editing it."
        )
    if isinstance(body.values, list):
        raise ApiError(
            400,
            f"values takes an object of state fields, e.g. {{'total': 5}}; got a list: "
            f"{body.values!r}. Send one update per request.",
        )
    at = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    if at is not None:
        fork = await graph.fork(row.thread_id, from_=at, state_store=service.store)
        row = replace(row, branch=fork.id)
    # create: a thread whose first run failed before it wrote has a graph and no history;
    # the edit starts its history, as LangGraph's update_state makes its first checkpoint.
    event_id = await graph.update_state(
        row.thread_id,
        from_lc_messages(body.values or {}),
        create=True,
        branch_id=row.branch,
        as_node=body.as_node,
        state_store=service.store,
    )
    # The status follows the edited state, as LangGraph's: a fork of a paused event waits
    # again, an edit after a failure clears the error; a queued or running run stays "busy".
    snapshot = await graph.get_state(row.thread_id, branch_id=row.branch, state_store=service.store)
    shown = "interrupted" if snapshot.next else "idle"
    await service.registry.update(lambda: _touched(service, row, shown))
    checkpoint = checkpoint_of(row.thread_id, event_id, row.branch)
    return JSONResponse(
        {"checkpoint": checkpoint, "configurable": checkpoint, "checkpoint_id": event_id}
    )


def _touched(service: Service, row: ThreadRow, status: str) -> list[ThreadRow]:
    """Return the thread's current row updated now, showing ``row``'s branch in ``status``
    ("busy" while one of its runs is queued or running)."""
    now = service.registry.threads.get(row.thread_id)
    if now is None:
        return []
    busy = bool(service.registry.active_runs(row.thread_id))
    shown = "busy" if busy else status
    return [replace(now, branch=row.branch, status=shown, error=None, updated_at=time.time())]


async def _history(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    if request.method == "GET":
        body = HistoryQuery(limit=query_count(request, "limit", 10))
    else:
        body = parse(HistoryQuery, await read_json(request, service.limits.max_depth))
    before = body.before
    if isinstance(before, dict):
        before = (before.get("configurable") or before).get("checkpoint_id")
    at = (body.checkpoint or {}).get("checkpoint_id")
    graph = service.graph_of(row)
    entries = await history_json(
        graph, service.store, row, body.limit, before, body.metadata, at=at
    )
    return JSONResponse(entries)


routes = [
    Route("/threads", _create, methods=["POST"]),
    Route("/threads/search", _search, methods=["POST"]),
    Route("/threads/count", _count, methods=["POST"]),
    Route("/threads/{thread_id}", _get, methods=["GET"]),
    Route("/threads/{thread_id}", _patch, methods=["PATCH"]),
    Route("/threads/{thread_id}", _delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/copy", _copy, methods=["POST"]),
    Route("/threads/{thread_id}/state", _state, methods=["GET"]),
    Route("/threads/{thread_id}/state", _update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", _state_at, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", _state, methods=["GET"]),
    Route("/threads/{thread_id}/history", _history, methods=["GET", "POST"]),
]
