"""Token usage and cost of a thread, summed from its stored history.

A model node stores each reply with the ``model`` that wrote it and the ``usage`` it
reported (``nodestep.agents.AssistantMessage``). The sums here read the records of one
branch, so they need no graph, no model and no run: the store alone, as a command-line
tool or a cost report has it. They work on the stored JSON form of the messages (a dict
with ``"role": "assistant"`` and a ``"usage"``), so this layer never imports the agents.

Why the history and not the state: a reply a later node removed from the conversation
(a summary that replaced it, a ``RemoveMessage``) was still paid for. Each reply counts
once, by its id, under the node whose update first stored it; one a checkpoint holds
that no event of the branch wrote (the start of a fork) counts under ``"(checkpoint)"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodestep._engine.history import History, HistoryEvent
from nodestep._errors import GraphConfigError
from nodestep._numbers import is_finite_number

__all__ = ["Usage", "UsageTotals", "usage_of"]

Prices = Mapping[str, tuple[float, float]]

FROM_CHECKPOINT = "(checkpoint)"
"""The node of a reply a checkpoint holds that no event of the branch wrote."""

UNNAMED = "(unnamed)"
"""The model of a reply stored without a model's name."""


@dataclass(frozen=True)
class UsageTotals:
    """Token counts of some model calls (one node's, one model's), and their cost.

    Attributes:
        calls: The model calls (replies) counted.
        input_tokens: The tokens sent to the models.
        output_tokens: The tokens the models wrote.
        total_tokens: Both, as the models reported them.
        cost: What they cost by the price table given, or ``None``: no table, or a
            model of these calls is not in it.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class Usage:
    """The token usage of a thread branch: in all, per node and per model.

    Attributes:
        thread_id: The thread.
        branch_id: The branch.
        calls: The model calls whose replies report usage.
        input_tokens: The tokens sent to the models, in all.
        output_tokens: The tokens the models wrote, in all.
        total_tokens: Both, as the models reported them.
        cost: The cost by the price table given, or ``None``: no table, or a model is
            not in it (``unpriced`` names those).
        by_node: The totals of each node's calls, by node name.
        by_model: The totals of each model's calls, by model name.
        unpriced: The models the price table has no price for, sorted; their calls have
            no cost, and neither has any sum that holds them.
    """

    thread_id: str
    branch_id: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    by_node: dict[str, UsageTotals] = field(default_factory=dict)
    by_model: dict[str, UsageTotals] = field(default_factory=dict)
    unpriced: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Call:
    node: str
    model: str
    input_tokens: int
    output_tokens: int
    total_tokens: int


def _check_prices(prices: Prices | None) -> None:
    """Refuse a price table that is not ``{model: (input, output)}`` in money per million.

    Raises:
        GraphConfigError: naming the entry and the form that works.
    """
    if prices is None:
        return
    if not isinstance(prices, Mapping):
        raise GraphConfigError(
            f"prices= takes a dict of model name to (input, output) prices per million "
            f"tokens, e.g. {{'gpt-4o-mini': (0.15, 0.60)}}; got a {type(prices).__name__}."
        )
    for model, price in prices.items():
        ok = isinstance(price, tuple) and len(price) == 2
        ok = ok and all(is_finite_number(p) and p >= 0 for p in price)
        if not isinstance(model, str) or not ok:
            raise GraphConfigError(
                f"prices[{model!r}] is {price!r}; a price is a pair of numbers >= 0, the "
                f"cost of a million input tokens and of a million output tokens, e.g. "
                f"{{'gpt-4o-mini': (0.15, 0.60)}}."
            )


def _replies(value: Any) -> Iterable[dict[str, Any]]:
    """Yield the stored assistant messages with usage that ``value`` (JSON data) holds."""
    if isinstance(value, list):
        for item in value:
            yield from _replies(item)
    elif isinstance(value, dict):
        if value.get("role") == "assistant" and isinstance(value.get("usage"), dict):
            yield value
        else:
            for item in value.values():
                if isinstance(item, list | dict):
                    yield from _replies(item)


def _updates(event: HistoryEvent) -> Iterable[tuple[str, Any]]:
    """Yield ``(node, stored values)`` of each update an event records."""
    data = event.record
    kind = data.get("type", event.type) if event.type == "subgraph" else event.type
    prefix = f"{event.path}/" if event.path else ""
    if kind == "superstep_completed":
        for task_id, body in (data.get("tasks") or {}).items():
            if isinstance(body, dict):
                yield prefix + str(body.get("node") or task_id), body.get("update")
    elif kind == "task_finished":
        yield prefix + str(data.get("node")), data.get("update")
    elif kind == "state_updated":
        yield prefix + str(data.get("node") or "update_state"), data.get("values")
    elif kind == "checkpoint":
        yield FROM_CHECKPOINT, data.get("values")
        # A fork in the middle of a superstep holds the tasks finished before it here, and
        # their replies are in no value yet, nor in any record of the branch.
        for task_id, body in (data.get("done") or {}).items():
            if isinstance(body, dict):
                yield prefix + str(body.get("node") or task_id), body.get("update")


def _calls(history: History) -> list[_Call]:
    """Return each model call of the branch once, in the order it was stored."""
    seen: set[str] = set()
    calls: list[_Call] = []
    for event in history:
        for node, values in _updates(event):
            for reply in _replies(values):
                reply_id = reply.get("id")
                if isinstance(reply_id, str):
                    if reply_id in seen:
                        continue  # a reply stored again (edited, or a checkpoint's copy)
                    seen.add(reply_id)
                usage = reply["usage"]
                inputs = int(usage.get("input_tokens") or 0)
                outputs = int(usage.get("output_tokens") or 0)
                total = int(usage.get("total_tokens") or inputs + outputs)
                model = reply.get("model") or UNNAMED
                calls.append(_Call(node, str(model), inputs, outputs, total))
    return calls


def _sum(calls: list[_Call], prices: Prices | None) -> UsageTotals:
    cost: float | None = None
    if prices is not None and all(c.model in prices for c in calls):
        cost = sum(
            c.input_tokens * prices[c.model][0] / 1e6 + c.output_tokens * prices[c.model][1] / 1e6
            for c in calls
        )
    return UsageTotals(
        calls=len(calls),
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        total_tokens=sum(c.total_tokens for c in calls),
        cost=cost,
    )


def usage_of(history: History, prices: Prices | None = None) -> Usage:
    """Sum the token usage of a branch's history, and its cost by ``prices``.

    Args:
        history: The branch's records.
        prices: Model name to ``(input, output)``: what a million tokens cost (in any
            currency, the same for all); ``None``: no cost.

    Raises:
        GraphConfigError: ``prices`` is not such a table.
    """
    _check_prices(prices)
    calls = _calls(history)
    by_node: dict[str, list[_Call]] = {}
    by_model: dict[str, list[_Call]] = {}
    for call in calls:
        by_node.setdefault(call.node, []).append(call)
        by_model.setdefault(call.model, []).append(call)
    total = _sum(calls, prices)
    unpriced = () if prices is None else tuple(sorted(m for m in by_model if m not in prices))
    return Usage(
        thread_id=history.thread_id,
        branch_id=history.branch_id,
        calls=total.calls,
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        total_tokens=total.total_tokens,
        cost=total.cost,
        by_node={node: _sum(group, prices) for node, group in by_node.items()},
        by_model={model: _sum(group, prices) for model, group in by_model.items()},
        unpriced=unpriced,
    )
