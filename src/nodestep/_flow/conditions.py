"""Check and compile a flow's ``when`` conditions against its state class.

It runs when ``Graph.flow()`` knows both the flow and the state: every condition is checked
(names, functions, types) and replaced by its compiled form in the routing tables, so a
run never parses or checks one. Every problem is reported together.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.condition import Condition
from nodestep._errors import ConditionError, GraphConfigError
from nodestep._flow.routing import When
from nodestep._flow.validation import Flow

__all__ = ["compile_conditions"]


def compile_conditions(graph_name: str, flow: Flow, state: type[BaseModel]) -> Flow:
    """Return ``flow`` with each condition checked against ``state`` and compiled.

    Raises:
        ConditionError: one condition is wrong (with its line and column).
        GraphConfigError: several are; ``problems`` lists each.
    """
    errors: list[ConditionError] = []
    edges: dict[str, Any] = dict(flow.edges)
    changed = False
    for name, route in flow.edges.items():
        if isinstance(route, When) and _has_condition(route):
            edges[name] = _compiled(route, state, errors)
            changed = True
    if len(errors) == 1:
        raise errors[0]
    if errors:
        problems = [str(e) for e in errors]
        listing = "\n".join(f"- {p}" for p in problems)
        raise GraphConfigError(
            f"Graph '{graph_name}' has {len(errors)} conditions that cannot work:\n{listing}",
            problems,
        )
    return dataclasses.replace(flow, edges=edges) if changed else flow


def _has_condition(route: When) -> bool:
    return any(isinstance(link.predicate, Condition) for link in route.links())


def _compiled(route: When, state: type[BaseModel], errors: list[ConditionError]) -> When:
    otherwise = route.otherwise
    if isinstance(otherwise, When):
        otherwise = _compiled(otherwise, state, errors)
    predicate = route.predicate
    if isinstance(predicate, Condition):
        try:
            predicate = predicate.compile(state, context=route.context, functions=route.functions)
        except ConditionError as error:
            errors.append(error)
    return dataclasses.replace(route, predicate=predicate, otherwise=otherwise)
