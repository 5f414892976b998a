"""The records of resilient nodes and private state changes survive a JSON round trip."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep import BaseState
from nodestep._state.schema import StateSchema
from nodestep._superstep.attempts import BreakerChanged, TaskRetried
from nodestep._superstep.codec import result_from_json, result_to_json
from nodestep._superstep.position import TaskResult
from nodestep._superstep.replay import decode


class S(BaseState):
    n: int = 0


SCHEMA = StateSchema.of(S)
names = st.text(st.characters(codec="utf-8", exclude_characters="[]"), min_size=1, max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


def stored(body: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(orjson.dumps(body))
    return data


@given(
    step=st.integers(0, 10**6),
    node=names,
    task=st.one_of(st.none(), st.integers(1, 9)),
    attempt=st.integers(1, 100),
    message=st.text(max_size=50),
    delay=st.floats(0, 1e6, allow_nan=False),
)
def test_a_task_retried_record_reads_back_equal(
    step: int, node: str, task: int | None, attempt: int, message: str, delay: float
) -> None:
    task_id = node if task is None else f"{node}[{task}]"
    record = TaskRetried(step, node, task_id, attempt, "ConnectionError", message, delay)
    assert decode(SCHEMA, stored(record.to_json(SCHEMA))) == record


@given(
    step=st.integers(0, 10**6), node=names, state=st.sampled_from(["open", "half_open", "closed"])
)
def test_a_breaker_changed_record_reads_back_equal(step: int, node: str, state: str) -> None:
    record = BreakerChanged(step, node, node, state)
    assert decode(SCHEMA, stored(record.to_json(SCHEMA))) == record


@pytest.mark.slow
@given(private=st.one_of(st.none(), st.dictionaries(st.text(max_size=5), json_values, max_size=4)))
def test_a_result_with_a_private_state_change_reads_back_equal(
    private: dict[str, Any] | None,
) -> None:
    result = TaskResult("a", "a", [], None, {}, None, private)
    body = stored(result_to_json(result))
    assert ("private" in body) is (private is not None)
    assert result_from_json(SCHEMA, "a", body) == result
