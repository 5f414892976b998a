"""The ``when:`` of an edge: parsed and checked at load, evaluated on the call's context.

A condition of an agent reads the call's ``context=`` by bare name (``user.tier ==
'gold'``, ``lang == 'ru'``), as Liman's did, and calls the functions ``functions=``
registers. So it is compiled against a state without fields and an open ``dict``
context: every name that is not a registered function reads the context, and a function
named bare (``rules.is_vip``) gets the context as a graph's gets the state. ``$is_error``
is false after a success; on a node's failure only conditions with ``$is_error`` are
asked, with the failure as their error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.condition import CompiledCondition, Condition, Source
from nodestep._conditions.env import Env
from nodestep._conditions.syntax import BoolOp, Call, Compare, Expr, ListExpr, Name, Not
from nodestep._declarative.documents import plain
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._errors import ConditionError
from nodestep.agents._specs.functions import Functions

__all__ = ["Route", "Silent", "choose", "compile_when"]


class Silent(BaseModel):
    """The state class a condition of an agent is compiled against: no fields, so bare
    names read the context."""


@dataclass(frozen=True)
class Route:
    """An edge ready to take: its target and its compiled condition (``None``: always).

    Attributes:
        target: The target node's name.
        condition: The compiled ``when``, or ``None``.
        functions: The functions the condition calls, by name.
    """

    target: str
    condition: CompiledCondition | None
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def on_error(self) -> bool:
        """Whether the edge takes a failure (its condition uses ``$is_error``)."""
        return self.condition is not None and self.condition.on_error


def compile_when(y: Y, target: str, functions: Functions, problems: Problems) -> Route | None:
    """Return the edge to ``target`` with the condition at ``y`` parsed and checked;
    ``None`` after adding a problem."""
    if not isinstance(y.value, str):
        problems.add(y, f"'when' takes a condition string, got {plain(y)!r}")
        return None
    exact = bool(y.positions) or not y.value  # an empty text has no place inside
    source = Source(y.file, y.line, y.column + (1 if y.quoted else 0), y.positions, exact)
    try:
        condition = Condition(y.value, source)
        refs, calls = _names(condition.tree)
        fns = functions.for_condition(refs, calls)
        return Route(target, condition.compile(Silent, context=dict, functions=fns), fns)
    except ConditionError as error:
        problems.items.append(str(error))
        return None


def _names(tree: Expr) -> tuple[list[str], list[str]]:
    """Return the dotted names a condition reads and the names it calls with arguments."""
    refs: list[str] = []
    calls: list[str] = []
    todo: list[Expr] = [tree]
    while todo:
        item = todo.pop()
        if isinstance(item, Name):
            refs.append(".".join(item.parts))
        elif isinstance(item, Call):
            if not item.builtin:
                calls.append(item.name)
            todo.extend(item.args or ())
        elif isinstance(item, BoolOp):
            todo.extend(item.operands)
        elif isinstance(item, Not):
            todo.append(item.operand)
        elif isinstance(item, Compare):
            todo.extend((item.left, item.right))
        elif isinstance(item, ListExpr):
            todo.extend(item.items)
    return refs, calls


def choose(routes: Sequence[Route], context: Any, error: BaseException | None = None) -> str | None:
    """Return the target of the first route that holds, or ``None``.

    After a success (``error`` is ``None``) every route is asked, ``$is_error`` being
    false; after a failure only the routes with ``$is_error``.

    Raises:
        GraphExecutionError: a condition cannot be evaluated on this context.
        Exception: whatever a registered function raises.
    """
    # The context stands in the state's place too: a bare function reference is called
    # with the state, as in a graph, and an agent's function takes the context. Nothing
    # else reads the state, which has no fields (``Silent``).
    env = Env(context, context, None, error)
    for route in routes:
        if error is not None and not route.on_error:
            continue
        if route.condition is None or route.condition.holds(env):
            return route.target
    return None
