"""Plan the next superstep from the routes of the last one, through trigger channels."""

from __future__ import annotations

from collections.abc import Sequence

from nodestep._state.channels import TriggerChannel
from nodestep._superstep.position import PlannedTask, SendRoute

__all__ = ["plan_tasks", "task_id_for"]


def task_id_for(node: str, index: int) -> str:
    """Return the id of a node's ``index``-th task in a superstep: ``name``, ``name[1]``, ..."""
    return node if index == 0 else f"{node}[{index}]"


def plan_tasks(routes: Sequence[Sequence[str | SendRoute]]) -> list[PlannedTask]:
    """Return the tasks of the next superstep, in scheduling order.

    ``routes`` holds each task's routes, in the scheduling order of the superstep that
    produced them. A node named by several routes runs once; each ``Send`` is a task of its
    own. Scheduling order is node name, then task index (the edge-triggered task first,
    then the sends in the order they were routed), so it never depends on timing. Join
    arrivals and deferred routes are settled before (``_superstep.barriers``).
    """
    if len(routes) == 1 and len(routes[0]) == 1 and type(routes[0][0]) is str:
        name = routes[0][0]  # the common case: one task routing to one node
        return [PlannedTask(name, name)]
    triggers: dict[str, TriggerChannel] = {}
    for task_routes in routes:
        for route in task_routes:
            if isinstance(route, SendRoute):
                trigger = triggers.get(route.node)
                if trigger is None:
                    trigger = triggers[route.node] = TriggerChannel(route.node)
                trigger.sends.append(
                    {"payload": route.payload, "json": route.payload_json, "input": route.input}
                )
            else:
                trigger = triggers.get(route)
                if trigger is None:
                    trigger = triggers[route] = TriggerChannel(route)
                trigger.edge = True
    if len(triggers) == 1:
        ((name, trigger),) = triggers.items()
        if trigger.edge and not trigger.sends:
            return [PlannedTask(name, name)]
    tasks: list[PlannedTask] = []
    for name in sorted(triggers):
        trigger = triggers[name]
        index = 0
        if trigger.edge:
            tasks.append(PlannedTask(name, name))
            index = 1
        for send in trigger.sends:
            task_id = task_id_for(name, index)
            tasks.append(PlannedTask(name, task_id, send["payload"], send["json"], send["input"]))
            index += 1
    return tasks
