"""Merging: one superstep's writes fold into the state in scheduling order."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from nodestep import BaseState, InvalidUpdateError, add, merge_dict
from nodestep._state.schema import StateSchema
from nodestep._superstep.merge import merge_results
from nodestep._superstep.position import TaskResult


class S(BaseState):
    answer: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)
    seen: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)


CHANNELS = StateSchema.of(S).channels


def _values() -> dict:
    return {"answer": "", "log": ["start"], "seen": {"x": 0}}


def test_a_single_task_writes_apply_in_order():
    result = TaskResult("a", "a", [("answer", "yes", False), ("log", ["a"], False)])
    assert merge_results(CHANNELS, _values(), [result], step=0) == {
        "answer": "yes",
        "log": ["start", "a"],
        "seen": {"x": 0},
    }


def test_merge_returns_new_values_and_leaves_the_given_ones_unchanged():
    values = _values()
    results = [
        TaskResult("a", "a", [("log", ["a"], False)]),
        TaskResult("b", "b", [("seen", {"y": 1}, False)]),
    ]
    merged = merge_results(CHANNELS, values, results, step=0)
    assert values == _values()
    assert merged is not values
    assert merged["seen"] == {"x": 0, "y": 1}


def test_reducer_writes_merge_in_the_order_of_the_results():
    results = [
        TaskResult("a", "a", [("log", ["a"], False)]),
        TaskResult("b", "b", [("log", ["b1", "b2"], False)]),
        TaskResult("c", "c", [("log", ["c"], False)]),
    ]
    merged = merge_results(CHANNELS, _values(), results, step=2)
    assert merged["log"] == ["start", "a", "b1", "b2", "c"]


def test_plain_field_rejects_two_writes_from_different_nodes_in_one_step():
    results = [
        TaskResult("alpha", "alpha", [("answer", "yes", False)]),
        TaskResult("beta", "beta", [("answer", "no", False)]),
    ]
    with pytest.raises(InvalidUpdateError) as info:
        merge_results(CHANNELS, _values(), results, step=3)
    error = info.value
    assert (error.field, error.step, error.writers) == ("answer", 3, ("alpha", "beta"))
    assert str(error) == (
        "Field 'answer' got writes from 'alpha', 'beta' in step 3; a plain field takes one "
        "writer per step. Give the field a merging reducer (Annotated[T, reducer], e.g. add "
        "for lists or operator.add for numbers), or let only one node write it per superstep."
    )


def test_tasks_of_one_node_writing_different_values_to_a_plain_field_conflict():
    results = [
        TaskResult("w", "w", [("answer", "first", False)]),
        TaskResult("w", "w[1]", [("answer", "second", False)]),
        TaskResult("w", "w[2]", [("answer", "third", False)]),
    ]
    with pytest.raises(
        InvalidUpdateError, match="Field 'answer' got writes from 'w' in step 1; 3 tasks"
    ) as info:
        merge_results(CHANNELS, _values(), results, step=1)
    assert (info.value.field, info.value.writers, info.value.step) == ("answer", ("w",), 1)


def test_tasks_of_one_node_writing_the_same_value_to_a_plain_field_merge():
    results = [
        TaskResult("w", "w", [("answer", "same", False)]),
        TaskResult("w", "w[1]", [("answer", "same", False)]),
    ]
    assert merge_results(CHANNELS, _values(), results, step=1)["answer"] == "same"


def test_tasks_of_one_node_writing_equal_values_of_two_types_to_a_plain_field_conflict():
    results = [
        TaskResult("w", "w", [("answer", 1, False)]),
        TaskResult("w", "w[1]", [("answer", 1.0, False)]),
    ]
    with pytest.raises(InvalidUpdateError, match="2 tasks of one node wrote different values"):
        merge_results(CHANNELS, _values(), results, step=1)


def test_tasks_of_one_node_replacing_a_reducer_field_with_different_values_conflict():
    results = [
        TaskResult("w", "w", [("log", ["one"], True)]),
        TaskResult("w", "w[1]", [("log", ["two"], True)]),
    ]
    with pytest.raises(InvalidUpdateError, match=r"2 tasks of one node wrote different Replace"):
        merge_results(CHANNELS, _values(), results, step=2)


def test_a_plain_field_written_by_one_node_among_several_tasks_takes_that_write():
    results = [
        TaskResult("a", "a", [("answer", "yes", False)]),
        TaskResult("b", "b", [("log", ["b"], False)]),
    ]
    assert merge_results(CHANNELS, _values(), results, step=1)["answer"] == "yes"


def test_replace_on_a_reducer_field_conflicts_with_another_nodes_write():
    results = [
        TaskResult("a", "a", [("log", ["fresh"], True)]),
        TaskResult("b", "b", [("log", ["b"], False)]),
    ]
    with pytest.raises(InvalidUpdateError, match=r"a Replace\(...\) write does not merge") as info:
        merge_results(CHANNELS, _values(), results, step=4)
    assert (info.value.field, info.value.step, info.value.writers) == ("log", 4, ("a", "b"))


def test_replace_on_a_reducer_field_from_the_only_writer_replaces_the_value():
    results = [
        TaskResult("a", "a", [("seen", {"only": 1}, True)]),
        TaskResult("b", "b", [("log", ["b"], False)]),
    ]
    assert merge_results(CHANNELS, _values(), results, step=0)["seen"] == {"only": 1}


def test_sends_of_one_node_may_replace_then_add_in_scheduling_order():
    results = [
        TaskResult("w", "w", [("log", ["reset"], True)]),
        TaskResult("w", "w[1]", [("log", ["more"], False)]),
    ]
    assert merge_results(CHANNELS, _values(), results, step=0)["log"] == ["reset", "more"]


def test_task_without_writes_changes_nothing():
    results = [TaskResult("a", "a", []), TaskResult("b", "b", [])]
    assert merge_results(CHANNELS, _values(), results, step=0) == _values()
