"""Recorded model replies and tool results, fed back instead of calling the model or tool.

A replay with ``recorded=True`` (``nodestep.testing.replay``) re-runs a stored thread
through the current graph without a live model: the model node takes the next reply its
node stored, and the tool node the stored result of each tool call (by its call id),
instead of calling them. The rest of the graph (routers, prompt building, plain nodes)
runs for real, so a change to it is tested against what the model and tools said then.

The recording is set for the replay's calls only, in a context variable, so it reaches
the nodes of those runs (anyio copies the context into each task) and nothing else.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["Recording", "recording", "using_recording"]


class Recording:
    """The model replies (by node, in order) and tool results (by call id) of a stored thread.

    Args:
        replies: Each model node's stored assistant messages (JSON), oldest first.
        tool_results: Each tool call's stored tool message (JSON), by call id.
        tool_updates: The other fields each tool call's node wrote with its message (a
            workspace's files), by call id.
        call_updates: The whole update of each call's task of an ``Agent``'s ToolNode
            (its result, its node's record, a delivery), by call id.
    """

    def __init__(
        self,
        replies: Mapping[str, list[dict[str, Any]]],
        tool_results: Mapping[str, Any],
        tool_updates: Mapping[str, dict[str, Any]] | None = None,
        call_updates: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        self._replies = {node: deque(items) for node, items in replies.items()}
        self._tool_results = dict(tool_results)
        self._tool_updates = dict(tool_updates or {})
        self._call_updates = dict(call_updates or {})

    def reply(self, node: str) -> dict[str, Any] | None:
        """Return the next stored reply of model node ``node``, or ``None`` if none is left."""
        queue = self._replies.get(node)
        return queue.popleft() if queue else None

    def tool_result(self, call_id: str) -> dict[str, Any] | None:
        """Return the stored tool message of call ``call_id``, or ``None`` if none was stored."""
        found: dict[str, Any] | None = self._tool_results.get(call_id)
        return found

    def tool_update(self, call_id: str) -> dict[str, Any]:
        """Return the fields other than its messages that the node of call ``call_id``
        wrote with the call's result (JSON, by field), or an empty dict."""
        return self._tool_updates.get(call_id, {})

    def call_update(self, call_id: str) -> dict[str, Any] | None:
        """Return the update the task of call ``call_id`` of an ``Agent``'s ToolNode stored
        (JSON, by field), or ``None`` if none was stored."""
        return self._call_updates.get(call_id)

    def __repr__(self) -> str:
        replies = sum(len(q) for q in self._replies.values())
        return f"Recording(replies={replies}, tool_results={len(self._tool_results)})"


_RECORDING: ContextVar[Recording | None] = ContextVar("nodestep_recording", default=None)


def recording() -> Recording | None:
    """Return the recording of the replay this code runs in, or ``None`` (a live run)."""
    return _RECORDING.get()


@contextmanager
def using_recording(found: Recording | None) -> Iterator[None]:
    """Feed ``found`` to the model and tool nodes of the runs made inside the block."""
    token = _RECORDING.set(found)
    try:
        yield
    finally:
        _RECORDING.reset(token)
