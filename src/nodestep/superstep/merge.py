"""Merge one superstep's writes into the state, in a fixed order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodestep.state.channels import Channel, Write
from nodestep.superstep.position import TaskResult

__all__ = ["merge_results"]


def merge_results(
    channels: Mapping[str, Channel],
    values: dict[str, Any],
    results: Sequence[TaskResult],
    step: int | None,
) -> dict[str, Any]:
    """Return new values with every task's writes merged, ``results`` in scheduling order.

    Writes merge in scheduling order (node name, then task index), not in the order tasks
    finished, so the merged state never depends on timing. A field without a merging
    reducer takes writes from one node only; ``values`` itself is not changed.

    Raises:
        InvalidUpdateError: two nodes wrote a field that does not merge.
    """
    merged = dict(values)
    if len(results) == 1:
        for key, value, replace in results[0].writes:
            merged[key] = channels[key].apply(merged[key], value, replace)
        return merged
    by_field: dict[str, list[Write]] = {}
    for result in results:
        for key, value, replace in result.writes:
            by_field.setdefault(key, []).append(Write(result.node, value, replace))
    for key, writes in by_field.items():
        if len(writes) == 1:
            w = writes[0]
            merged[key] = channels[key].apply(merged[key], w.value, w.replace)
        else:
            merged[key] = channels[key].merge(merged[key], writes, step)
    return merged
