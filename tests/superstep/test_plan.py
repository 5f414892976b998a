"""Planning: the routes of one superstep become the next superstep's tasks."""

from __future__ import annotations

from nodestep._superstep.plan import plan_tasks, task_id_for
from nodestep._superstep.position import PlannedTask, SendRoute


def _ids(tasks: list[PlannedTask]) -> list[tuple[str, str]]:
    return [(t.node, t.task_id) for t in tasks]


def test_no_routes_plan_no_tasks():
    assert plan_tasks([]) == []
    assert plan_tasks([[], []]) == []


def test_one_edge_plans_one_task_named_after_the_node():
    (task,) = plan_tasks([["b"]])
    assert task == PlannedTask("b", "b")
    assert task.payload is None


def test_a_node_named_by_several_tasks_runs_once():
    assert _ids(plan_tasks([["d"], ["d"], ["d", "d"]])) == [("d", "d")]


def test_tasks_are_ordered_by_node_name_not_routing_order():
    assert _ids(plan_tasks([["zeta"], ["alpha", "mid"]])) == [
        ("alpha", "alpha"),
        ("mid", "mid"),
        ("zeta", "zeta"),
    ]


def test_each_send_is_a_task_of_its_own_with_its_payload():
    routes = [[SendRoute("w", {"n": 1}), SendRoute("w", {"n": 2})], [SendRoute("w", {"n": 3})]]
    tasks = plan_tasks(routes)
    assert _ids(tasks) == [("w", "w"), ("w", "w[1]"), ("w", "w[2]")]
    assert [t.payload for t in tasks] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_edge_task_comes_before_the_sends_of_the_same_node():
    routes = [[SendRoute("w", {"n": 1})], ["w"], [SendRoute("w", {"n": 2})]]
    tasks = plan_tasks(routes)
    assert _ids(tasks) == [("w", "w"), ("w", "w[1]"), ("w", "w[2]")]
    assert [t.payload for t in tasks] == [None, {"n": 1}, {"n": 2}]


def test_sends_and_edges_of_several_nodes_follow_node_name_then_index():
    routes = [[SendRoute("b", {"k": 1}), "c"], ["a", SendRoute("b", {"k": 2})]]
    assert _ids(plan_tasks(routes)) == [("a", "a"), ("b", "b"), ("b", "b[1]"), ("c", "c")]


def test_send_payload_json_is_carried_to_the_task():
    (task,) = plan_tasks([[SendRoute("w", {"n": 1}, {"n": 1})]])
    assert task.payload_json == {"n": 1}


def test_task_ids_count_from_the_plain_node_name():
    assert [task_id_for("n", i) for i in range(3)] == ["n", "n[1]", "n[2]"]
