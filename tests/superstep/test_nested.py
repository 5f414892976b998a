"""The ``subgraph`` record: its JSON form, how it moves a position, and checkpoints."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep import END, START, BaseState, Graph, StateStoreError, node
from nodestep._superstep import machine
from nodestep._superstep.nested import SubgraphEvent, child_path
from nodestep._superstep.position import PlannedTask, TaskResult
from nodestep._superstep.records import Checkpoint
from nodestep._superstep.replay import decode


class Plain(BaseState):
    n: int = 0


@node
def bump(state: Plain) -> dict[str, int]:
    return {"n": state.n + 1}


SCHEMA = Graph(Plain).flow(START >> bump, bump >> END).schema


def child(kind: str, seq: int) -> dict[str, Any]:
    return {"type": kind, "id": f"c{seq}", "seq": seq, "run": "r"}


def test_a_subgraph_record_round_trips_through_its_json_form() -> None:
    record = SubgraphEvent("review[1]", child("run_started", 2))
    body = record.to_json(SCHEMA)
    assert body == {"type": "subgraph", "task": "review[1]", "record": child("run_started", 2)}
    assert decode(SCHEMA, body) == record


def test_a_subgraph_record_without_a_child_record_is_reported_damaged() -> None:
    body = {"type": "subgraph", "task": "review", "record": "oops", "seq": 7}
    with pytest.raises(StateStoreError, match=r"The 'subgraph' record .*record 7.* is damaged"):
        decode(SCHEMA, body)


def test_child_path_unwraps_every_level() -> None:
    inner = child("run_paused", 4)
    body = {"type": "subgraph", "task": "a", "record": SubgraphEvent("b", inner).to_json(SCHEMA)}
    assert child_path(body) == (["a", "b"], inner)


@given(kinds=st.lists(st.sampled_from(["run_started", "superstep_completed", "checkpoint"])))
def test_a_task_keeps_the_child_records_from_the_childs_last_checkpoint_on(
    kinds: list[str],
) -> None:
    pos = machine.new_thread({"n": 0})
    for seq, kind in enumerate(kinds, start=1):
        SubgraphEvent("sub", child(kind, seq)).advance(SCHEMA, pos)
    last = max((i for i, k in enumerate(kinds) if k == "checkpoint"), default=0)
    assert [r["type"] for r in pos.children.get("sub", [])] == kinds[last:]


def test_a_finished_task_and_a_completed_superstep_drop_the_child_records() -> None:
    pos = machine.new_thread({"n": 0})
    machine.start_turn(
        pos, SCHEMA.channels, [], [PlannedTask("a", "a"), PlannedTask("b", "b")], "r"
    )
    SubgraphEvent("a", child("checkpoint", 1)).advance(SCHEMA, pos)
    SubgraphEvent("b", child("checkpoint", 1)).advance(SCHEMA, pos)
    machine.finish_task(pos, TaskResult("a", "a", []))
    assert list(pos.children) == ["b"]
    machine.complete_superstep(pos, 0, {"n": 0}, [[], []])
    assert pos.children == {}


def test_a_checkpoint_keeps_the_child_records_of_unfinished_tasks() -> None:
    pos = machine.new_thread({"n": 0})
    machine.start_turn(pos, SCHEMA.channels, [], [PlannedTask("a", "a")], "r")
    SubgraphEvent("a", child("checkpoint", 1)).advance(SCHEMA, pos)
    body = Checkpoint(pos).to_json(SCHEMA)
    assert body["children"] == {"a": [child("checkpoint", 1)]}
    assert Checkpoint.from_json(SCHEMA, body).position.children == pos.children
    assert "children" not in Checkpoint(machine.new_thread({"n": 0})).to_json(SCHEMA)
