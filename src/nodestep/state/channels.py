"""Channels: one per state key, plus one trigger channel per node.

A compiled state schema holds one channel per field. A *last-value* channel keeps the last
write and takes one writer per superstep; a *reducer* channel folds every write into its
value with the field's reducer. Edges are data too: each node has a *trigger* channel, and
a task that routes to a node writes to that node's trigger. The planner runs the nodes whose
trigger channels were written in the last superstep; triggers are ephemeral, so each write
fires exactly once.

Channels hold no values themselves: values live in the state dict that the superstep
algebra passes around, so a snapshot is just a dict and copying it is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodestep.errors import InvalidUpdateError
from nodestep.state.reducers import replace

__all__ = [
    "Channel",
    "ChannelWrite",
    "FieldWrite",
    "LastValueChannel",
    "ReducerChannel",
    "TriggerChannel",
]


FieldWrite = tuple[str, Any, bool]
"""One validated write, as a node's update holds it: field, value, and whether it bypasses
the field's reducer (``Replace``)."""


@dataclass(slots=True, frozen=True)
class ChannelWrite:
    """One write to a channel, as a superstep's merge sees it: who wrote, the value, and
    whether it bypasses the reducer."""

    writer: str
    value: Any
    replace: bool = False


def _conflict(
    key: str, writes: Sequence[ChannelWrite], step: int | None, why: str
) -> InvalidUpdateError:
    writers = sorted({w.writer for w in writes})
    where = f" in step {step}" if step is not None else ""
    names = ", ".join(f"'{w}'" for w in writers)
    return InvalidUpdateError(
        f"Field '{key}' got writes from {names}{where}; {why}. "
        f"Give the field a merging reducer (Annotated[T, reducer], e.g. add for lists or "
        f"operator.add for numbers), or let only one node write it per superstep.",
        field=key,
        writers=writers,
        step=step,
    )


class Channel:
    """A state key and the rule for merging writes into it."""

    __slots__ = ("key",)
    merging: bool = False

    def __init__(self, key: str) -> None:
        self.key = key

    def apply(self, current: Any, value: Any, replace: bool) -> Any:
        """Return the new value after one write (``replace``: bypass the reducer)."""
        raise NotImplementedError

    def merge(self, current: Any, writes: Sequence[ChannelWrite], step: int | None = None) -> Any:
        """Return the new value after all writes of one superstep, in their fixed order."""
        raise NotImplementedError


class LastValueChannel(Channel):
    """A plain field: a write replaces the value; one writer per superstep.

    Several ``Send`` tasks of the same node may write it; the last one wins.
    """

    __slots__ = ()

    def apply(self, current: Any, value: Any, replace: bool) -> Any:
        return value

    def merge(self, current: Any, writes: Sequence[ChannelWrite], step: int | None = None) -> Any:
        first = writes[0].writer
        for w in writes:
            if w.writer != first:
                raise _conflict(self.key, writes, step, "a plain field takes one writer per step")
        return writes[-1].value


class ReducerChannel(Channel):
    """A field with a reducer: every write is folded into the value."""

    __slots__ = ("reducer",)
    merging = True

    def __init__(self, key: str, reducer: Callable[[Any, Any], Any]) -> None:
        super().__init__(key)
        self.reducer = reducer

    def apply(self, current: Any, value: Any, replace: bool) -> Any:
        if replace:
            return value
        return self.reducer(current, value)

    def merge(self, current: Any, writes: Sequence[ChannelWrite], step: int | None = None) -> Any:
        if any(w.replace for w in writes):
            first = writes[0].writer
            if any(w.writer != first for w in writes):
                raise _conflict(
                    self.key, writes, step, "a Replace(...) write does not merge with others"
                )
        value = current
        for w in writes:
            value = w.value if w.replace else self.reducer(value, w.value)
        return value


def channel_for(key: str, reducer: Callable[[Any, Any], Any] | None) -> Channel:
    """Return the channel for a field with the given reducer (``None`` or ``replace``: plain)."""
    if reducer is None or reducer is replace:
        return LastValueChannel(key)
    return ReducerChannel(key, reducer)


@dataclass(slots=True)
class TriggerChannel:
    """The ephemeral channel that starts a node: written by routes, read once by the planner.

    ``edge`` is set when an edge, branch or ``Command(goto=...)`` named the node; ``sends``
    holds the payloads of ``Send`` tasks in the order they were routed.
    """

    node: str
    edge: bool = False
    sends: list[dict[str, Any]] = field(default_factory=list)
