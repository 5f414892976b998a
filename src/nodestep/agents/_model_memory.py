"""A model node's own conversation, kept in its private state (``conversation="private"``).

With ``model_node(..., conversation="private")`` the node keeps every message it has
seen and written in a ``ModelMemory``, its private state: stored with the thread's
history, restored after a restart, forked and rewound with the thread, and seen by no
other node. On each call it takes in the shared ``messages`` it has not seen yet, asks
the model with its whole memory, and writes the reply to both: the shared state still
gets the reply, so tool nodes and the caller see it. What other nodes do to the shared
conversation afterwards (trim it, remove messages) does not change what this node
remembers.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from nodestep._display.text import model_repr
from nodestep.agents._messages import AnyMessage

__all__ = ["ModelMemory", "take_in"]


class ModelMemory(BaseModel):
    """The private state of a model node made with ``conversation="private"``.

    Read it with ``graph.node_state(thread_id, "agent")``.

    Attributes:
        messages: Every message the node has seen or written, oldest first.
    """

    messages: list[AnyMessage] = Field(default_factory=list)

    def __repr__(self) -> str:
        return model_repr(self)


def take_in(memory: ModelMemory, shared: list[Any]) -> None:
    """Append the messages of ``shared`` that ``memory`` does not hold yet, in order.

    The walk goes back from the end of ``shared`` to the newest remembered message, so a
    turn costs the new messages, not the whole conversation. Messages are compared whole
    (id, role, content): ids alone are not enough, since the shared conversation may
    give an id again once its messages were removed.
    """
    newest = memory.messages[-1] if memory.messages else None
    start = len(shared)
    while start > 0 and (newest is None or shared[start - 1] != newest):
        start -= 1
    if start == 0 and newest is not None:
        # The newest remembered message is gone from the shared state (trimmed or
        # removed): take in whatever the memory does not already hold.
        memory.messages.extend(m for m in shared if m not in memory.messages)
        return
    memory.messages.extend(shared[start:])
