"""A run's request body, checked and read into what the run does (the kwargs on its row).

``_runs`` admits a run; this module answers what it asks for: the stream modes served,
the refusals of what is not served, ``config.recursion_limit``, the input and
``command.update`` with LangChain messages made nodestep's, ``command.resume`` as one
value or answers by interrupt id, and the context its nodes get.
"""

from __future__ import annotations

import uuid
from typing import Any

from nodestep import Graph, UnknownThreadError
from nodestep.serve._bodies import ApiError, RunCreate
from nodestep.serve._registry import ThreadRow
from nodestep.serve._service import Service
from nodestep.serve._shapes import from_lc_messages

__all__ = [
    "check_served",
    "converted_input",
    "nothing_to_resume",
    "recursion_limit",
    "refuse_unserved",
    "run_context",
    "run_kwargs",
    "stream_modes",
]

_MODES = frozenset({"values", "updates", "messages-tuple", "messages", "custom", "debug", "events"})


def stream_modes(body: RunCreate) -> list[str]:
    modes = [body.stream_mode] if isinstance(body.stream_mode, str) else list(body.stream_mode)
    check_served(modes)
    return modes


def check_served(modes: list[str]) -> None:
    """Refuse a stream mode the server does not serve.

    Raises:
        ApiError: 422 naming the first such mode and the modes served.
    """
    unknown = [m for m in modes if m not in _MODES]
    if unknown:
        raise ApiError(
            422,
            f"stream_mode {unknown[0]!r} is not served; "
            f"the modes are: {', '.join(sorted(_MODES))}.",
        )


async def _resume(
    graph: Graph[Any], service: Service, row: ThreadRow, resume: Any
) -> dict[str, Any]:
    """Return the stored form of ``command.resume``: one value, or answers by interrupt id."""
    try:
        snapshot = await graph.get_state(
            row.thread_id, branch_id=row.branch, state_store=service.store
        )
    except UnknownThreadError:
        raise ApiError(422, nothing_to_resume(row.thread_id)) from None
    # Answers by interrupt id when any key names an open interrupt: a key that names none
    # (one whose task finished since its node failed on an answer, say) is then refused
    # by name, rather than the whole dict given as one answer to the interrupt left.
    pending = set(snapshot.interrupts)
    if isinstance(resume, dict) and not pending.isdisjoint(resume):
        return {"answers": resume}
    return {"value": resume}


def refuse_unserved(body: RunCreate, graph: Graph[Any], *, queued: bool = False) -> None:
    """Refuse a run that asks for what is not served, or names nodes the graph lacks
    (``queued``: the runs go to workers).

    Why before anything else: a refused request must change nothing, and the admission
    that follows cancels a thread's runs (``interrupt``, ``rollback``) and forks it
    (``checkpoint_id``).

    Raises:
        ApiError: 422 naming the field, the value, and what to send instead.
    """
    stream_modes(body)  # a stream mode not served
    if body.webhook is not None:  # a client counting on the call would wait forever
        raise ApiError(
            422,
            f"webhook is not served: nodestep serve calls no URL when a run ends (got "
            f"{body.webhook!r}). Wait for the run with runs.join or runs.wait, or stream it.",
        )
    command = body.command or {}
    if command.get("goto") is not None:
        raise ApiError(
            422,
            "command.goto is not served: a nodestep run starts where the graph's edges lead "
            "and cannot jump to a node from outside. Let a node choose with "
            "Command(goto=...), or change the state with command.update.",
        )
    for name in ("interrupt_before", "interrupt_after"):
        # The engine's own refusal would come once the run started: it would fail the
        # run and leave a healthy thread in "error" for a typo in a request.
        nodes = getattr(body, name)
        unknown = [] if nodes in (None, "*") else [n for n in nodes if n not in graph.nodes]
        if unknown:
            raise ApiError(
                422,
                f"{name} names {unknown[0]!r}, which graph {graph.name!r} does not have. "
                f"Its nodes: {', '.join(graph.nodes)}.",
            )
    update = command.get("update")
    if update is not None and not isinstance(update, dict):
        raise ApiError(
            422, f"command.update takes an object of state fields, got {type(update).__name__}."
        )
    if recursion_limit(body) is not None and queued:
        raise ApiError(
            422,
            "config.recursion_limit is not served with --workers: a worker runs each graph "
            "with its own max_steps (a recursion_limit of max_steps + 1). Leave it out, or "
            "serve without --workers.",
        )


def recursion_limit(body: RunCreate) -> int | None:
    """Return the run's ``config.recursion_limit``, ``None`` when it sends none.

    Why at least 2: LangGraph counts one step more than nodestep's supersteps (a run of
    ``recursion_limit`` n runs at most n - 1 supersteps), so 1 would let no run end.

    Raises:
        ApiError: 422, not a whole number of at least 2.
    """
    limit = (body.config or {}).get("recursion_limit")
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 2:
        raise ApiError(
            422,
            f"config.recursion_limit takes a whole number of at least 2, got {limit!r}: a "
            f"run of recursion_limit n runs at most n - 1 supersteps. Send e.g. 25.",
        )
    return limit


def converted_input(body: RunCreate) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Return the run's input and ``command.update`` with LangChain message dicts made
    nodestep's.

    Raises:
        ApiError: 422, a message nodestep cannot hold (a content block of another type).
    """
    update = (body.command or {}).get("update")
    return (
        from_lc_messages(body.input) if isinstance(body.input, dict) else None,
        from_lc_messages(update) if update is not None else None,
    )


async def run_kwargs(
    service: Service,
    graph: Graph[Any],
    row: ThreadRow,
    body: RunCreate,
    converted: tuple[dict[str, Any] | None, dict[str, Any] | None],
    *,
    keyed: bool,
) -> dict[str, Any]:
    """Return what the run does, as stored on its row; ``converted`` is ``converted_input(body)``.

    ``keyed``: run input under the run id as ``request_key``. A run stored only at its end
    (``runs.wait``) is never continued by another server, so it goes without one, and is
    spared the store's look-up of the key.
    """
    command = body.command or {}
    update = command.get("update")
    graph_input, graph_update = converted
    # On a thread with history an update edits the state (the run then continues what is
    # pending); on a new thread it is the run's input, as there is nothing to edit.
    alone = body.input is None and update is not None and "resume" not in command
    if alone and not await service.store.last_sequence(row.thread_id, row.branch):
        body.input, graph_input, graph_update = update, graph_update, None
    kwargs: dict[str, Any] = {
        "input": body.input,
        "command": body.command,
        "stream_mode": stream_modes(body),
        "interrupt_before": body.interrupt_before,
        "interrupt_after": body.interrupt_after,
        "graph_input": graph_input,
        "update": graph_update,
        "resume": None,
        "run_id": str(uuid.uuid4()),
        "on_disconnect": body.on_disconnect,
        "stream_resumable": body.stream_resumable,
        "stream_subgraphs": body.stream_subgraphs,
        "keyed": keyed,
        "after_seconds": body.after_seconds,
    }
    if (limit := recursion_limit(body)) is not None:  # stored: a continued run keeps it
        kwargs["config"] = {"recursion_limit": limit}
    if "resume" in command:
        kwargs["resume"] = await _resume(graph, service, row, command["resume"])
    return kwargs


def nothing_to_resume(thread_id: str) -> str:
    return (
        f"Thread {thread_id!r} has no interrupt to resume: it has not run yet. Start it with "
        f"input instead of command.resume."
    )


def run_context(body: RunCreate) -> dict[str, Any] | None:
    if body.context is not None:
        return body.context
    configurable = (body.config or {}).get("configurable") or {}
    reserved = {"thread_id", "checkpoint_id", "checkpoint_ns", "run_id"}
    return {k: v for k, v in configurable.items() if k not in reserved} or None
