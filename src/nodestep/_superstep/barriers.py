"""Join barriers and deferred nodes: routes that wait before they plan a task.

``[b, c] >> d`` is a join: each of ``b`` and ``c`` routes to it with a ``JoinRoute`` when
it runs, and ``d`` is planned once all of them have arrived in the turn, however many
supersteps apart; then its barrier starts over, so a loop that runs ``b`` and ``c`` again
runs ``d`` again. A barrier counts nodes, not tasks: several ``Send`` tasks of ``b`` in one
superstep are one arrival. Its progress is part of the position (``Position.joins``), so a
stored thread keeps it across a crash.

A deferred node (``@node(defer=True)``) is routed to with a ``DeferredRoute``: the route is
held in ``Position.deferred`` until a superstep plans nothing else, then the held routes
plan the next superstep. When nothing at all is left, the turn is over and barriers that
did not fill are dropped: their missing sources did not run in the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from nodestep._superstep.plan import plan_tasks
from nodestep._superstep.position import (
    DeferredRoute,
    JoinRoute,
    PlannedTask,
    Position,
    Route,
    SendRoute,
)

__all__ = ["as_plain", "holds", "plan_held"]


def holds(routes: Sequence[Sequence[Route]]) -> bool:
    """Tell whether any route arrives at a join or is held for a deferred node."""
    for task_routes in routes:
        for route in task_routes:
            if type(route) is not str and type(route) is not SendRoute:
                return True
    return False


def plan_held(pos: Position, routes: Sequence[Sequence[Route]]) -> list[PlannedTask]:
    """Return the next superstep's tasks, moving ``pos``'s barriers and held routes on.

    Every arrival of the superstep is counted before any barrier is checked, so a join
    whose sources all arrive in one superstep fires once. Joins settle in the order of
    their node names, which keeps the held routes (and so the plan) deterministic.
    """
    plain: list[list[str | SendRoute]] = []
    arrived: dict[str, JoinRoute] = {}
    sources: dict[str, set[str]] = {}
    held = list(pos.deferred)
    for task_routes in routes:
        kept: list[str | SendRoute] = []
        for route in task_routes:
            if isinstance(route, JoinRoute):
                arrived.setdefault(route.node, route)
                sources.setdefault(route.node, set()).add(route.source)
            elif isinstance(route, DeferredRoute):
                held.append(route.route)
            else:
                kept.append(route)
        plain.append(kept)
    joins = dict(pos.joins)  # a new dict: a record or a cached position may hold the old
    fired: list[str | SendRoute] = []
    for node in sorted(arrived):
        join = arrived[node]
        progress = set(joins.get(node, ())) | sources[node]
        if progress.issuperset(join.sources):
            joins.pop(node, None)
            (held if join.defer else fired).append(node)
        else:
            joins[node] = sorted(progress)
    plain.append(fired)
    tasks = plan_tasks(plain)
    if not tasks and held:
        tasks, held = plan_tasks([held]), []
    pos.deferred = held
    pos.joins = joins if tasks else {}
    return tasks


def as_plain(routes: Sequence[Sequence[Route]]) -> Sequence[Sequence[str | SendRoute]]:
    """Return ``routes`` typed as plain routes; only for routes ``holds`` said are plain."""
    return cast("Sequence[Sequence[str | SendRoute]]", routes)
