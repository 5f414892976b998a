"""Map nodestep's state, messages, interrupts and events to the Agent Server API's JSON.

The LangGraph clients read LangChain message dicts (``type: human | ai | tool | system``)
and checkpoints as ``{"thread_id", "checkpoint_ns", "checkpoint_id"}``; nodestep keeps
messages with a ``role`` and names every point of a thread by its history event id. This
module is the one place the two vocabularies meet, in both directions, so the routes never
spell either.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from pydantic import BaseModel

from nodestep import Interrupt
from nodestep.serve._bodies import ApiError
from nodestep.state import to_json_value

__all__ = [
    "NAMESPACE",
    "assistant_id_of",
    "checkpoint_of",
    "from_lc_messages",
    "interrupt_json",
    "iso",
    "message_chunk",
    "page_headers",
    "state_values",
    "text_content",
    "to_lc_message",
]

NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""The namespace of assistant ids: the default assistant of graph ``g`` is uuid5(NS, g)."""

_TO_LC = {"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}
_FROM_LC = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"} | {
    "tool": "tool",
    "system": "system",
}


def assistant_id_of(graph_id: str) -> str:
    """Return the id of a graph's default assistant, as the reference server makes it."""
    return str(uuid.uuid5(NAMESPACE, graph_id))


def iso(timestamp: float) -> str:
    """Return a ``time.time()`` timestamp as the ISO 8601 text the clients parse."""
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat()


def page_headers(total: int, offset: int, limit: int) -> dict[str, str]:
    """Return the paging headers of a search answer, as LangGraph's server sends them.

    ``X-Pagination-Total`` counts every match; ``X-Pagination-Next``, the offset of the
    next page, is there only while one follows: the JS client's
    ``assistants.search({includePagination: true})`` reads it to page on.
    """
    headers = {"X-Pagination-Total": str(total)}
    if offset + limit < total:
        headers["X-Pagination-Next"] = str(offset + limit)
    return headers


def to_lc_message(message: dict[str, Any]) -> dict[str, Any]:
    """Return a stored nodestep message (its JSON form) as a LangChain message dict."""
    role = message.get("role", "")
    out: dict[str, Any] = {
        "type": _TO_LC.get(role, role),
        "content": message.get("content", ""),
        "id": message.get("id"),
        "name": message.get("name"),
        "additional_kwargs": {},
        "response_metadata": {},
    }
    if role == "assistant":
        out["tool_calls"] = [
            {"name": c["name"], "args": c["args"], "id": c["id"], "type": "tool_call"}
            for c in message.get("tool_calls") or ()
        ]
        out["invalid_tool_calls"] = []
    elif role == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
        out["status"] = "error" if message.get("status") == "error" else "success"
    return out


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("role") in _TO_LC
        and "content" in value
        and "id" in value
    )


def _lc_values(value: Any) -> Any:
    if isinstance(value, list) and value and all(_is_message(item) for item in value):
        return [to_lc_message(item) for item in value]
    if _is_message(value):
        return to_lc_message(value)
    return value


def state_values(values: Any, chat: str | None = None) -> dict[str, Any]:
    """Return a state (a model or a dict of field values) as JSON with LangChain messages.

    Why each field on its own: a list whose items are all stored messages is a
    conversation, and a client reads it as LangChain dicts; every other value stays the
    JSON form nodestep stores. The state of an ``Agent`` names its start node's
    conversation in ``chat_messages``: that field (or ``chat``, for values given as a
    dict) is shown as ``messages`` too, which chat clients read.
    """
    if isinstance(values, BaseModel):
        chat = chat or getattr(type(values), "chat_messages", None)
        values = {name: getattr(values, name) for name in type(values).model_fields}
    data = to_json_value(dict(values), what="the state")
    out = {key: _lc_values(value) for key, value in data.items()}
    if isinstance(chat, str) and chat in out and "messages" not in out:
        # A served Agent: a chat client reads its start node's conversation as messages.
        out["messages"] = out[chat]
    return out


def text_content(content: Any) -> Any:
    """Join a LangChain content list's text blocks (and plain strings); other content
    passes through.

    Raises:
        ApiError: 422, a block that is not text (an image, a file): a nodestep message
            holds text, and a run would fail on it, or lose it, after its admission.
    """
    if isinstance(content, list) and all(isinstance(block, dict | str) for block in content):
        blocks = [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]
        other = [block.get("type") for block in blocks if block.get("type", "text") != "text"]
        if other:
            raise ApiError(
                422,
                f"A message's content has a block of type {other[0]!r}; nodestep messages "
                f"hold text, so send the content as text or as text blocks "
                f"({{'type': 'text', 'text': ...}}).",
            )
        return "".join(str(block.get("text", "")) for block in blocks)
    return content


def _from_lc(message: Any) -> Any:
    if not (isinstance(message, dict) and message.get("type") in _FROM_LC):
        return message
    role = _FROM_LC[message["type"]]
    out: dict[str, Any] = {"role": role, "content": text_content(message.get("content", ""))}
    if message.get("id"):
        out["id"] = message["id"]
    if role == "user" and message.get("name"):
        out["name"] = message["name"]
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = [
            {"name": c["name"], "args": c.get("args", {}), "id": c.get("id")}
            for c in message["tool_calls"]
        ]
    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id", "")
        out["name"] = message.get("name") or ""
    return out


def from_lc_messages(values: dict[str, Any]) -> dict[str, Any]:
    """Return input values with LangChain message dicts made nodestep message dicts.

    A client sends ``{"type": "human", "content": [{"type": "text", "text": ...}], "id"}``;
    ``add_messages`` takes ``{"role": "user", "content": ..., "id"}``. The id is kept, so the
    stored message has the id the client gave it.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, list):
            out[key] = [_from_lc(item) for item in value]
        else:
            out[key] = _from_lc(value)
    return out


def interrupt_json(pending: Interrupt) -> dict[str, Any]:
    """Return a pending interrupt as the clients show it: ``{"value", "id"}``.

    The id is nodestep's interrupt key (``"<task>:<id>"``): unique in the thread, and the key
    a resume mapping answers it by.
    """
    return {"value": pending.payload, "id": pending.key}


def checkpoint_of(thread_id: str, event_id: str | None, branch_id: str) -> dict[str, Any]:
    """Return a checkpoint object; ``branch_id`` is nodestep's extra field."""
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": event_id,
        "checkpoint_map": None,
        "branch_id": branch_id,
    }


def message_chunk(chunk: Any) -> dict[str, Any]:
    """Return a model's token chunk as a LangChain ``AIMessageChunk`` dict.

    Its ``id`` is the id the stored reply gets, so a chat UI replaces the streamed message
    with the stored one instead of showing both.
    """
    if not hasattr(chunk, "message_id"):
        return to_json_value(chunk, what="a messages event")  # type: ignore[no-any-return]
    return {
        "type": "AIMessageChunk",
        "content": chunk.content,
        "id": chunk.message_id,
        "tool_call_chunks": [
            {**to_json_value(part, what="a tool call chunk"), "type": "tool_call_chunk"}
            for part in chunk.tool_call_chunks
        ],
        "additional_kwargs": {},
        "response_metadata": {},
    }
