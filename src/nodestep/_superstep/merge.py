"""Merge writes into the state: one writer's in order, or one superstep's in a fixed order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodestep._state.channels import Channel, ChannelWrite, FieldWrite
from nodestep._superstep.position import TaskResult

__all__ = ["apply_writes", "merge_results"]


def apply_writes(
    channels: Mapping[str, Channel],
    values: dict[str, Any],
    writes: Iterable[FieldWrite],
    writer: str | None = None,
    step: int | None = None,
) -> dict[str, Any]:
    """Return new values with one writer's writes applied in order; ``values`` is not changed.

    Input and ``update_state`` edits are one writer each, so their writes never conflict:
    each goes through the field's reducer (or replaces it, for ``Replace``) in turn.
    ``writer`` and ``step`` are for errors (``writer`` ``None``: the input or
    ``update_state``).

    Raises:
        InvalidUpdateError: a reducer failed, or a merged value breaks its field's
            constraints.
    """
    merged = dict(values)
    for key, value, replace in writes:
        merged[key] = channels[key].apply(merged[key], value, replace, writer, step)
    return merged


def merge_results(
    channels: Mapping[str, Channel],
    values: dict[str, Any],
    results: Sequence[TaskResult],
    step: int | None,
) -> dict[str, Any]:
    """Return new values with every task's writes merged, ``results`` in scheduling order.

    Writes merge in scheduling order (node name, then task index), not in the order tasks
    finished, so the merged state never depends on timing. A field without a merging
    reducer takes writes from one node only, and from several tasks of that node only when
    they write the same value; ``values`` itself is not changed.

    Raises:
        InvalidUpdateError: two nodes (or two tasks of one node, with different values)
            wrote a field that does not merge; a reducer failed; or a merged value breaks
            its field's constraints.
    """
    if len(results) == 1:
        return apply_writes(channels, values, results[0].writes, results[0].node, step)
    merged = dict(values)
    by_field: dict[str, list[ChannelWrite]] = {}
    for result in results:
        for key, value, replace in result.writes:
            by_field.setdefault(key, []).append(ChannelWrite(result.node, value, replace))
    for key, writes in by_field.items():
        if len(writes) == 1:
            w = writes[0]
            merged[key] = channels[key].apply(merged[key], w.value, w.replace, w.writer, step)
        else:
            merged[key] = channels[key].merge(merged[key], writes, step)
    return merged
