"""A run's stream in LangGraph's shapes: each nodestep event as the modes asked, a pause, the end.

The executor runs a graph and hands each ``StreamEvent`` here; what a client of
LangGraph's SDK receives (the ``values``, ``updates``, ``messages``, ``custom``, ``debug``
and ``events`` modes, a subgraph's events as ``mode|<task path>``) is decided in this
module alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodestep import Agent, StateSnapshot, StreamEvent
from nodestep.agents import next_message_id  # the ids an agent's nodes give
from nodestep.serve._registry import RunRow
from nodestep.serve._shapes import interrupt_json, message_chunk, state_values, to_lc_message

__all__ = ["emit_event", "emit_pause", "paused", "run_end", "sent_text", "with_sent"]


def run_end(
    snapshot: StateSnapshot[Any], modes: list[str], emit: Callable[[str, Any], None]
) -> tuple[dict[str, Any], bool]:
    """Return the end of a run with nothing left to run: the thread's values (sent as a
    ``values`` event when streamed), and whether it waits, paused, for answers."""
    values = state_values(snapshot.value)
    if "values" in modes:
        emit("values", values)
    if snapshot.status == "idle":
        return values, False
    pending = [interrupt_json(i) for i in snapshot.interrupts.values()]
    return paused(values, pending), True


def emit_pause(
    state: Any,
    pending: list[dict[str, Any]],
    modes: list[str],
    emit: Callable[[str, Any], None],
    chat: str | None,
) -> None:
    """Send a pause as LangGraph 1.x does: ``updates`` with ``__interrupt__``, then a last
    ``values`` with the state and ``__interrupt__``.

    Why the state too: a client that keeps the last ``values`` event as the thread's state
    (``useStream``) would otherwise show an empty state while the question waits.
    """
    if not pending:  # a breakpoint's pause asks nothing: no __interrupt__ event
        return
    if "updates" in modes:
        emit("updates", {"__interrupt__": pending})
    if "values" in modes:
        emit("values", paused(state_values(state, chat), pending))


def paused(values: dict[str, Any], pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a paused run's answer: its values, and ``__interrupt__`` when an interrupt
    waits (a pause of ``interrupt_before``/``interrupt_after`` has none, and LangGraph
    then leaves the key out)."""
    return values | {"__interrupt__": pending} if pending else values


def sent_text(agent: Agent | None, graph_input: Any) -> tuple[str, str] | None:
    """Return the start node and the text of an Agent's step input, else ``None``."""
    if agent is None or not isinstance(graph_input, dict):
        return None
    delivery = (graph_input.get("inbox") or {}).get("input")
    if not isinstance(delivery, dict) or not isinstance(delivery.get("text"), str):
        return None
    return str(delivery.get("to")), delivery["text"]


def with_sent(
    values: dict[str, Any], sent: tuple[str, str] | None, chat: str | None
) -> dict[str, Any]:
    """Return an Agent's first ``values`` with the user's message just sent in ``messages``.

    Why: the start node writes the user's message together with its reply, in its own
    superstep, but a chat client shows the state of the first ``values`` event as the
    input applied (LangGraph's first event ends with the new message). The message gets
    the id the node will store it under, so the next ``values`` event replaces it.
    """
    if sent is None or chat is None or not isinstance(values.get("messages"), list):
        return values
    node, text = sent
    stored = values["messages"]
    ident = next_message_id([_Id(m.get("id")) for m in stored], node)
    message = to_lc_message({"role": "user", "content": text, "id": ident})
    return values | {"messages": [*stored, message], chat: [*stored, message]}


class _Id:
    """A shown message as ``next_message_id`` reads it: by its ``id``."""

    __slots__ = ("id",)

    def __init__(self, ident: Any) -> None:
        self.id = ident if isinstance(ident, str) else None


def emit_event(
    event: StreamEvent,
    modes: list[str],
    emit: Callable[[str, Any], None],
    run: RunRow,
    chat: str | None,
) -> None:
    """Send one nodestep event as the modes asked; a subgraph's as ``mode|<task path>``.

    ``chat``: the graph's field shown as ``messages`` too (see ``state_values``).
    """
    mode = event.mode
    suffix = "" if event.path is None else "|" + event.path.replace("/", "|")
    if "events" in modes and mode in ("debug", "messages"):
        _emit_callback_event(event, emit, run, suffix)
    if mode == "values" and "values" in modes:
        emit("values" + suffix, state_values(event.data, chat if not suffix else None))
    elif mode == "updates" and "updates" in modes:
        update = state_values(event.data) if event.data is not None else None
        emit("updates" + suffix, {event.node or "": update})
    elif mode == "custom" and "custom" in modes:
        emit("custom" + suffix, event.data)
    elif mode == "debug" and "debug" in modes:
        payload = {"step": event.step, "type": event.data["type"], "payload": event.data}
        emit("debug" + suffix, payload)
    elif mode == "messages" and ("messages-tuple" in modes or "messages" in modes):
        emit("messages" + suffix, [message_chunk(event.data), _metadata(event, run)])


def _metadata(event: StreamEvent, run: RunRow) -> dict[str, Any]:
    return {
        "langgraph_node": event.node,
        "langgraph_step": event.step,
        "langgraph_checkpoint_ns": event.path or "",
        "run_id": run.run_id,
        "thread_id": run.thread_id,
    }


def _emit_callback_event(
    event: StreamEvent, emit: Callable[[str, Any], None], run: RunRow, suffix: str
) -> None:
    """Send the ``events`` mode: a node's start and end, and a model's token chunks.

    Why only these: they are what nodestep's debug and messages streams know; LangGraph's
    other callback events (tools, retrievers, prompts) have no nodestep event to come from.
    """
    if event.mode == "messages":
        kind, data = "on_chat_model_stream", {"chunk": message_chunk(event.data)}
    elif event.data["type"] == "node_input":
        kind, data = "on_chain_start", {"input": state_values(event.data["state"])}
    elif event.data["type"] == "node_output":
        update = event.data["update"]
        kind, data = "on_chain_end", {"output": state_values(update) if update else update}
    else:
        return
    body: dict[str, Any] = {
        "event": kind,
        "name": event.node,
        "run_id": run.run_id,
        "tags": [],
        "metadata": _metadata(event, run),
        "data": data,
    }
    emit("events" + suffix, body)
