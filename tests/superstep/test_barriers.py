"""Join barriers and held routes in the pure core: planning, and their stored form."""

from __future__ import annotations

from nodestep import BaseState
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.barriers import plan_held
from nodestep._superstep.codec import route_from_json, route_to_json
from nodestep._superstep.position import (
    DeferredRoute,
    JoinRoute,
    PlannedTask,
    Position,
    SendRoute,
)
from nodestep._superstep.records import Checkpoint


class S(BaseState):
    n: int = 0


SCHEMA = StateSchema(S)


def join(source: str, *, defer: bool = False) -> JoinRoute:
    return JoinRoute("d", source, ("b", "c"), defer)


def nodes(tasks: list[PlannedTask]) -> list[str]:
    return [t.task_id for t in tasks]


def test_sources_arriving_in_one_superstep_fire_the_join_once():
    pos = Position(values={})
    assert nodes(plan_held(pos, [[join("b")], [join("c")], [join("b")]])) == ["d"]
    assert pos.joins == {}


def test_a_partial_barrier_is_kept_sorted_in_a_new_dict():
    pos = Position(values={})
    before = pos.joins
    assert nodes(plan_held(pos, [[join("c")], ["x"]])) == ["x"]
    assert pos.joins == {"d": ["c"]} and before == {}
    assert nodes(plan_held(pos, [[join("b")]])) == ["d"]
    assert pos.joins == {}


def test_a_barrier_starts_over_after_it_fires():
    pos = Position(values={})
    plan_held(pos, [[join("b")], [join("c")]])
    assert nodes(plan_held(pos, [[join("b")], ["x"]])) == ["x"]
    assert pos.joins == {"d": ["b"]}


def test_held_routes_wait_until_nothing_else_is_planned():
    pos = Position(values={})
    assert nodes(plan_held(pos, [[DeferredRoute("s"), "x"]])) == ["x"]
    assert pos.deferred == ["s"]
    assert nodes(plan_held(pos, [[DeferredRoute("s")], ["y"]])) == ["y"]
    assert nodes(plan_held(pos, [[]])) == ["s"]
    assert pos.deferred == []


def test_a_deferred_join_target_is_held_when_the_join_fills():
    pos = Position(values={})
    assert nodes(plan_held(pos, [[join("b", defer=True)], [join("c", defer=True)], ["x"]])) == ["x"]
    assert pos.deferred == ["d"]


def test_the_turn_ending_drops_a_barrier_that_did_not_fill():
    pos = Position(values={})
    assert plan_held(pos, [[join("b")]]) == []
    assert pos.joins == {}


def test_a_new_turn_drops_the_barriers_and_held_routes_of_the_last():
    pos = Position(values={}, joins={"d": ["b"]}, deferred=["s"], status="running")
    machine.start_turn(pos, SCHEMA.channels, [], [PlannedTask("a", "a")], "run")
    assert pos.joins == {} and pos.deferred == []


def test_complete_superstep_without_held_routes_plans_as_before():
    pos = Position(values={})
    machine.complete_superstep(pos, 0, {"n": 1}, [["b", "a"]])
    assert nodes(pos.tasks) == ["a", "b"]


def test_every_route_kind_round_trips_through_its_stored_form():
    routes = [
        "a",
        SendRoute("w", {"n": 2}, {"n": 2}),
        SendRoute("w", {}, None, {"index": 1, "chunk": "x"}),
        JoinRoute("d", "b", ("b", "c")),
        JoinRoute("d", "b", ("b", "c"), defer=True),
        DeferredRoute("s"),
        DeferredRoute(SendRoute("w", {}, None, {"index": 0})),
    ]
    for route in routes:
        assert route_from_json(SCHEMA, route_to_json(route)) == route
    assert route_to_json(routes[2]) == {"send": "w", "input": {"index": 1, "chunk": "x"}}
    assert route_to_json(routes[5]) == {"defer": "s"}


def test_a_checkpoint_keeps_barriers_held_routes_and_task_inputs():
    pos = Position(
        values={"n": 3},
        status="running",
        step=2,
        tasks=[PlannedTask("w", "w[1]", {}, None, {"index": 1})],
        joins={"d": ["c"]},
        deferred=["s", SendRoute("w", {}, None, {"index": 5})],
    )
    body = Checkpoint(pos).to_json(SCHEMA)
    assert body["joins"] == {"d": ["c"]}
    assert body["deferred"] == ["s", {"send": "w", "input": {"index": 5}}]
    back = Checkpoint.from_json(SCHEMA, body).position
    assert back.joins == pos.joins and back.deferred == pos.deferred
    assert back.tasks[0].input == {"index": 1} and back.tasks[0].payload is None


def test_a_checkpoint_without_barriers_reads_as_none_and_writes_no_keys():
    body = {"type": "checkpoint", "values": {"n": 0}, "status": "idle", "step": 0}
    pos = Checkpoint.from_json(SCHEMA, body).position
    assert pos.joins == {} and pos.deferred == []
    assert Checkpoint(pos).to_json(SCHEMA) == body
