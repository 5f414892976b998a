"""GraphResult: what invoke and ainvoke return."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Graph, GraphResult, InMemoryStateStore, add, node


class S(BaseState):
    count: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def first(state: S):
    return {"count": state.count + 1, "log": ["first"]}


@node
def second(state: S):
    return {"log": ["second"]}


GRAPH = Graph(S).flow(START >> first, first >> second, second >> END)


def test_result_of_a_completed_run():
    result = GRAPH.invoke({"count": 1})
    assert isinstance(result, GraphResult)
    assert result.status == "completed"
    assert type(result.state) is S
    assert result.state == S(count=2, log=["first", "second"])
    assert result.step == 1
    assert len(result.thread_id) == 32  # no store: a new id, never reused
    assert result.branch_id == "main"
    assert len(result.run_id) == 32
    assert result.checkpoint_id is None
    assert result.interrupts == {}


def test_result_data_is_the_state_as_a_dict_of_field_values():
    result = GRAPH.invoke({})
    assert result.data == {"count": 1, "log": ["first", "second"]}
    assert type(result.data) is dict


def test_result_step_is_the_last_superstep_run():
    @node
    def only(state: S):
        return None

    assert Graph(S).flow(START >> only, only >> END).invoke({}).step == 0


def test_result_is_frozen():
    result = GRAPH.invoke({})
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'status'"):
        result.status = "interrupted"  # type: ignore[misc]


@pytest.mark.anyio
async def test_ainvoke_returns_the_same_result_as_invoke():
    store = InMemoryStateStore()
    result = await GRAPH.ainvoke({"count": 1}, thread_id="t-2", state_store=store)
    # invoke inside a running event loop runs on a worker thread; the result is the same.
    from_invoke = GRAPH.invoke({"count": 1}, thread_id="t-3", state_store=store)
    assert from_invoke.run_id != result.run_id
    same = {"run_id": result.run_id, "thread_id": "t-2", "checkpoint_id": result.checkpoint_id}
    assert dataclasses.replace(from_invoke, **same) == result
    assert (result.status, result.data, result.step, result.thread_id) == (
        "completed",
        {"count": 2, "log": ["first", "second"]},
        1,
        "t-2",
    )


@pytest.mark.anyio
async def test_result_with_a_store_names_the_last_history_event():
    store = InMemoryStateStore()
    result = await GRAPH.ainvoke({}, thread_id="t-3", state_store=store)
    history = await GRAPH.history("t-3", state_store=store)
    assert result.checkpoint_id == history.events[-1].id
    assert result.thread_id == "t-3"
