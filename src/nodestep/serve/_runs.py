"""Runs: create (background), wait, stream, join, cancel, list and delete them.

Every way of starting a run goes through ``_start``: check the body, find the assistant
and the thread, apply the thread's multitask strategy, take a time-travel fork, and store
the run ``pending`` with the thread ``busy`` in one append, before anything is answered.
Why before: an acknowledged run survives a server that is killed the next moment.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodestep import Graph, UnknownThreadError
from nodestep.serve._bodies import (
    ApiError,
    RunCreate,
    check_select,
    parse,
    query_count,
    read_json,
    thread_uuid,
)
from nodestep.serve._graphs import agent_input
from nodestep.serve._registry import RunRow, ThreadRow
from nodestep.serve._run_request import (
    check_served,
    converted_input,
    nothing_to_resume,
    refuse_unserved,
    run_context,
    run_kwargs,
)
from nodestep.serve._service import Service
from nodestep.serve._shapes import assistant_id_of, iso
from nodestep.serve._sse import EventStream
from nodestep.serve._waiting import WaitAnswer

__all__ = ["routes"]


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def run_json(run: RunRow) -> dict[str, Any]:
    """Return a run as the API shows it; its context and ``configurable`` are never
    stored, so never shown (its ``config`` holds only a ``recursion_limit`` sent)."""
    hidden = ("graph_input", "resume", "update", "keyed")
    shown = {k: v for k, v in run.kwargs.items() if k not in hidden}
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "status": run.status,
        "metadata": run.metadata,
        "multitask_strategy": run.multitask_strategy,
        "kwargs": shown,
    }


_RUN_FIELDS = (
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "multitask_strategy",
    "kwargs",
)
"""The fields of a run, in the order ``run_json`` shows them; ``runs.list(select=...)``
picks some."""


def _location(run: RunRow, then: str | None = None) -> dict[str, str]:
    """Return the headers that name the run; ``then``: ``"stream"`` or ``"join"``, the
    endpoint ``Location`` names, where the LangGraph SDK reconnects a dropped answer.

    A stateless run's ``Location`` names its thread too: while it runs it is a thread's
    run, and once it ended, its events stay joinable (``Executor.kept_run``).
    """
    path = f"/threads/{run.thread_id}/runs/{run.run_id}"
    return {"Content-Location": path} | ({"Location": f"{path}/{then}"} if then else {})


async def _thread_for(
    service: Service, thread_id: str | None, body: RunCreate, malformed: int
) -> ThreadRow:
    now = time.time()
    if thread_id is None:
        return ThreadRow(str(uuid.uuid4()), now, now)
    key = thread_uuid(thread_id, malformed)
    row = service.registry.threads.get(key)
    if row is not None and not await service.expire(row):
        return row
    if body.if_not_exists == "create":
        return ThreadRow(key, now, now)
    raise ApiError(404, f"Thread {thread_id!r} not found.")


async def _start(
    request: Request, thread_id: str | None, malformed: int = 422, *, streamed: bool = True
) -> RunRow:
    """Admit the request's run; ``streamed=False`` (``runs.wait``) records no stream events.

    Why: a run nobody streams needs only its final values, and each stream mode costs the
    run work per superstep.
    """
    service = _service(request)
    body = parse(RunCreate, await read_json(request, service.limits.max_depth))
    if not streamed:
        body.stream_mode = []
    await service.registry.load()
    async with service.creating:
        return await _admit(service, body, thread_id, malformed, durable=streamed)


async def _admit(
    service: Service, body: RunCreate, thread_id: str | None, malformed: int, durable: bool
) -> RunRow:
    """Check a run against its thread and store it, with the thread ``busy``."""
    graph_id = service.graph_id(body.assistant_id)
    graph = service.graphs[graph_id]
    refuse_unserved(body, graph, queued=service.executor.queue is not None)
    agent = service.agents.get(graph_id)
    if agent is not None and isinstance(body.input, dict):
        body.input = agent_input(agent, body.input)  # a chat client's messages
    converted = converted_input(body)  # refused messages too before any run is cancelled
    row = await _thread_for(service, thread_id, body, malformed)
    at = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    await _refuse_unknown_start(service, graph, row, body, at)
    await _make_way(service, row, body, graph_id)
    if at is not None:
        row = await _fork(service, graph, row, at)
    now = time.time()
    kwargs = await run_kwargs(service, graph, row, body, converted, keyed=durable)
    run = RunRow(
        run_id=kwargs["run_id"],
        thread_id=row.thread_id,
        assistant_id=assistant_id_of(graph_id),
        graph_id=graph_id,
        created_at=now,
        updated_at=now,
        metadata=dict(body.metadata or {}),
        multitask_strategy=body.multitask_strategy,
        kwargs=kwargs,
        temporary=thread_id is None and body.on_completion != "keep",
    )
    service.executor.contexts[run.run_id] = run_context(body)

    def build() -> list[ThreadRow | RunRow]:
        current = _admission(service, row, run.multitask_strategy)
        branch = row.branch if at is not None else current.branch
        metadata = current.metadata | {"graph_id": graph_id, "assistant_id": run.assistant_id}
        return [
            replace(current, metadata=metadata, status="busy", branch=branch, updated_at=now),
            run,
        ]

    try:
        if durable:
            await service.registry.update(build)
        else:
            service.registry.remember(*build())
    except ApiError:
        service.executor.contexts.pop(run.run_id, None)
        raise
    service.executor.submit(run)
    return run


async def _make_way(service: Service, row: ThreadRow, body: RunCreate, graph_id: str) -> None:
    """Refuse a run of another graph on a thread with history, then apply the run's
    ``multitask_strategy`` to the thread's active runs (refuse, or cancel them).

    Raises:
        ApiError: 409, the thread holds another graph's state, or it is busy and the
            strategy is ``reject``.
    """
    held = row.metadata.get("graph_id")
    if held not in (None, graph_id) and await service.store.last_sequence(row.thread_id, "main"):
        raise ApiError(
            409,
            f"Thread {row.thread_id!r} holds the state of graph {held!r}, not {graph_id!r}: a "
            f"nodestep thread keeps one graph's state. Run {held!r} on it, or use a new thread.",
        )
    if service.registry.active_runs(row.thread_id) and body.multitask_strategy == "reject":
        _admission(service, row, body.multitask_strategy)  # refuses before a fork is made
    if body.multitask_strategy in ("interrupt", "rollback"):
        for run in service.registry.active_runs(row.thread_id):
            await _cancel(service, run, rollback=body.multitask_strategy == "rollback")


async def _refuse_unknown_start(
    service: Service, graph: Graph[Any], row: ThreadRow, body: RunCreate, at: str | None
) -> None:
    """Refuse a run that names a checkpoint the thread lacks, or resumes a thread with no
    history.

    Why before ``_make_way``: that cancels the thread's runs (``interrupt``, ``rollback``),
    and a refused request must change nothing.

    Raises:
        ApiError: 404, no checkpoint ``at`` in the thread; 422, a resume of a thread that
            never ran.
    """
    try:
        if at is not None:
            await graph.get_state(row.thread_id, at=at, state_store=service.store)
        elif "resume" in (body.command or {}):
            await graph.get_state(row.thread_id, branch_id=row.branch, state_store=service.store)
    except UnknownThreadError:
        if at is not None:
            raise ApiError(404, _unknown_checkpoint(at, row.thread_id)) from None
        raise ApiError(422, nothing_to_resume(row.thread_id)) from None


def _unknown_checkpoint(at: str, thread_id: str) -> str:
    return (
        f"Checkpoint {at!r} not found in thread {thread_id!r}; take a checkpoint_id from "
        f"threads.get_history of that thread."
    )


async def _fork(service: Service, graph: Graph[Any], row: ThreadRow, at: str) -> ThreadRow:
    """Return the thread's row on a new branch forked at checkpoint ``at`` (time travel).

    Raises:
        ApiError: 404, no such checkpoint in the thread.
    """
    try:
        fork = await graph.fork(row.thread_id, from_=at, state_store=service.store)
    except UnknownThreadError:
        raise ApiError(404, _unknown_checkpoint(at, row.thread_id)) from None
    return replace(row, branch=fork.id)


def _admission(service: Service, row: ThreadRow, strategy: str) -> ThreadRow:
    """Return the thread's current row, if a run with ``strategy`` may start on it now.

    Why called on every try of the store: another server may have started a run on the
    thread since ``row`` was read, and ``reject`` must see it.

    Raises:
        ApiError: 409, the thread is busy and the strategy is ``reject``.
    """
    active = service.registry.active_runs(row.thread_id)
    if active and strategy == "reject":
        raise ApiError(
            409,
            f"Thread {row.thread_id!r} is busy with run {active[0].run_id}; wait for it, or send "
            f"multitask_strategy='enqueue'.",
        )
    return service.registry.threads.get(row.thread_id) or row


async def _cancel(service: Service, run: RunRow, *, rollback: bool = False) -> None:
    """Cancel a run; ``rollback``: undo its writes and delete it, as LangGraph does.

    A run that has not started yet wrote nothing: with ``rollback`` its row goes. Another
    server's run is only marked ``interrupted`` (that server stores its end, and would
    store the row again).
    """
    executor = service.executor
    if executor.cancel(run.run_id, rollback=rollback) or run.status != "pending":
        return
    if rollback and executor.is_mine(run.run_id):
        await service.registry.write(("run", run.run_id))
    else:
        await service.registry.write(replace(run, status="interrupted", updated_at=time.time()))
    executor.wake(run.thread_id)  # a queue waiting for the run's after_seconds goes on
    executor.events_of(run.run_id).end(await executor.values(run.graph_id, run.thread_id))


async def _create(request: Request) -> Response:
    run = await _start(request, request.path_params.get("thread_id"))
    return JSONResponse(run_json(run), headers=_location(run))


async def _wait(request: Request) -> Response:
    service = _service(request)
    thread_id = request.path_params.get("thread_id")
    run = await _start(request, thread_id, malformed=400, streamed=False)
    events = service.executor.events_of(run.run_id)

    async def answer() -> Any:
        return events.result

    cancel = run.kwargs.get("on_disconnect") == "cancel"
    return WaitAnswer(  # type: ignore[return-value]
        events,
        answer,
        _location(run, "join"),
        service.limits.heartbeat,
        (lambda: _cancel(service, run)) if cancel else None,
    )


def _cancels_on_disconnect(request: Request) -> bool:
    """Tell whether a join asks to cancel the run when its client goes away."""
    return request.query_params.get("cancel_on_disconnect", "").lower() in ("1", "true", "yes")


async def _stream(request: Request) -> Response:
    service = _service(request)
    run = await _start(request, request.path_params.get("thread_id"))
    cancel = run.kwargs.get("on_disconnect") == "cancel"
    on_disconnect = (lambda: service.executor.cancel(run.run_id)) if cancel else None
    events = service.executor.events_of(run.run_id)
    return EventStream(  # type: ignore[return-value]
        events, 0, _location(run, "stream"), on_disconnect, service.limits.heartbeat
    )


async def _run(request: Request) -> tuple[Service, RunRow]:
    service = _service(request)
    run_id = request.path_params["run_id"]
    try:
        row = await service.thread(request.path_params["thread_id"])
    except ApiError as missing:
        # A stateless run's thread is deleted when it ends; its events are kept a while.
        kept = service.executor.kept_run(run_id)
        if (
            missing.status == 404
            and kept
            and kept.thread_id == thread_uuid(request.path_params["thread_id"])
        ):
            return service, kept
        raise
    run = service.registry.runs.get(run_id)
    if run is None or run.thread_id != row.thread_id:
        raise ApiError(404, f"Run {run_id!r} not found in thread {row.thread_id!r}.")
    return service, run


async def _get(request: Request) -> Response:
    return JSONResponse(run_json((await _run(request))[1]))


async def _list(request: Request) -> Response:
    service = _service(request)
    row = await service.thread(request.path_params["thread_id"])
    limit = query_count(request, "limit", 10)
    offset = query_count(request, "offset", 0)
    status = request.query_params.get("status")
    select = request.query_params.getlist("select")  # runs.list(select=[...]): one each
    check_select(select, _RUN_FIELDS, "a run")
    runs = service.registry.runs_of(row.thread_id)
    runs = [r for r in runs if status in (None, r.status)]
    runs.sort(key=lambda r: r.created_at, reverse=True)
    shown = [run_json(r) for r in runs[offset : offset + limit]]
    if select:
        shown = [{k: v for k, v in run.items() if k in select} for run in shown]
    return JSONResponse(shown)


async def _join(request: Request) -> Response:
    service, run = await _run(request)
    events = service.executor.follow(run)

    async def answer() -> Any:
        # A cancelled run (and one that ended before this server started) answers the
        # thread's values, as LangGraph's join does.
        if events.result:
            return events.result
        return await service.executor.values(run.graph_id, run.thread_id)

    cancel = _cancels_on_disconnect(request)
    if run.status in ("pending", "running") or service.executor.is_mine(run.run_id):
        return WaitAnswer(  # type: ignore[return-value]
            events,
            answer,
            _location(run, "join"),
            service.limits.heartbeat,
            (lambda: _cancel(service, run)) if cancel else None,
        )
    return JSONResponse(await answer(), headers=_location(run, "join"))


async def _join_stream(request: Request) -> Response:
    service, run = await _run(request)
    last = request.headers.get("last-event-id")
    start = int(last) + 1 if last and last.isdigit() else 0
    modes = _join_modes(request.query_params.getlist("stream_mode"))
    events = service.executor.follow(run)
    if run.status not in ("pending", "running") and events.result is None:
        events.end({})
    cancel = _cancels_on_disconnect(request)
    return EventStream(  # type: ignore[return-value]
        events,
        start,
        _location(run, "stream"),
        (lambda: _cancel(service, run)) if cancel else None,
        heartbeat=service.limits.heartbeat,
        modes=modes,
    )


def _join_modes(given: list[str]) -> frozenset[str] | None:
    """Return the stream modes a ``join_stream`` asks for, ``None`` for all.

    The SDKs send ``stream_mode`` once per mode; a JSON list in one is taken too, as
    LangGraph's server takes it.

    Raises:
        ApiError: 422, a mode that is not served, or a list that is not JSON.
    """
    modes: list[str] = []
    for value in given:
        if not value:  # the Python SDK sends ``stream_mode=`` when it asks for no mode
            continue
        if not value.startswith("["):
            modes.append(value)
            continue
        try:
            listed = orjson.loads(value)
        except orjson.JSONDecodeError:
            listed = None
        if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
            raise ApiError(422, f"stream_mode={value!r} is not a mode or a JSON list of modes.")
        modes += listed
    check_served(modes)
    return frozenset(modes) or None


async def _cancel_route(request: Request) -> Response:
    service, run = await _run(request)
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise ApiError(
            422,
            f"Query parameter action={action!r} is not a cancel action; send "
            f"action=interrupt (stop the run) or action=rollback (stop it and undo it).",
        )
    await _cancel(service, run, rollback=action == "rollback")
    if request.query_params.get("wait") in ("1", "true"):
        await service.executor.events_of(run.run_id).finished.wait()
        return Response(status_code=202, headers=_location(run, "join"))
    return Response(status_code=202)


async def _delete(request: Request) -> Response:
    service, run = await _run(request)
    await _cancel(service, run)
    await service.registry.write(("run", run.run_id))
    return Response(status_code=204)


routes = [
    Route("/runs", _create, methods=["POST"]),
    Route("/runs/wait", _wait, methods=["POST"]),
    Route("/runs/stream", _stream, methods=["POST"]),
    Route("/threads/{thread_id}/runs", _create, methods=["POST"]),
    Route("/threads/{thread_id}/runs", _list, methods=["GET"]),
    Route("/threads/{thread_id}/runs/wait", _wait, methods=["POST"]),
    Route("/threads/{thread_id}/runs/stream", _stream, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", _get, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}", _delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", _join, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", _join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", _cancel_route, methods=["POST"]),
]
