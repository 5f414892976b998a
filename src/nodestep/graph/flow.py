"""The flow: edges, routes and the values a node returns to choose what runs next.

A flow is data. ``START >> a``, ``a >> b``, ``a >> when(...)`` and ``a >> branch(...)`` make
``Edge`` objects; ``Graph.flow`` validates them and turns them into routing tables. Nothing
here runs a node, so a loader can build the same objects from a file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nodestep.graph.nodes import Node

__all__ = [
    "END",
    "START",
    "Branch",
    "Command",
    "Edge",
    "Send",
    "Terminal",
    "When",
    "branch",
    "when",
]


class Terminal:
    """``START`` or ``END``: the two ends of a flow."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __rshift__(self, target: Any) -> Edge:
        return Edge(self, target)

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


START = Terminal("START")
"""The start of a flow: ``START >> first_node``."""

END = Terminal("END")
"""The end of a flow: ``last_node >> END``; a node may also return ``END``."""


@dataclass(frozen=True, slots=True)
class When:
    """A two-way route: ``target`` when ``predicate(state)`` is true, else ``otherwise``."""

    predicate: Callable[[Any], bool]
    target: Node | Terminal
    otherwise: Node | Terminal

    def targets(self) -> list[Node | Terminal]:
        return [self.target, self.otherwise]


@dataclass(frozen=True, slots=True)
class Branch:
    """A many-way route: ``mapping[router(state)]`` runs next."""

    router: Callable[[Any], Any]
    mapping: Mapping[Any, Node | Terminal]

    def targets(self) -> list[Node | Terminal]:
        return list(self.mapping.values())


_NOT_GIVEN: Any = object()


def when(
    predicate: Callable[[Any], bool],
    target: Node | Terminal,
    otherwise: Node | Terminal = _NOT_GIVEN,
) -> When:
    """Route to ``target`` when ``predicate(state)`` is true, else to ``otherwise``.

    The predicate gets the merged state after the superstep and must return a ``bool``.

    Raises:
        TypeError: ``otherwise=`` is missing, or a target is not a node or ``END``.
    """
    if otherwise is _NOT_GIVEN:
        raise TypeError(
            "when(predicate, target) needs otherwise=...: the node to run when the predicate "
            "is false (or END)."
        )
    if not callable(predicate):
        raise TypeError(f"when() takes a callable predicate first, got {predicate!r}.")
    for t in (target, otherwise):
        _check_target(t, "when()")
    return When(predicate, target, otherwise)


def branch(router: Callable[[Any], Any], mapping: Mapping[Any, Node | Terminal]) -> Branch:
    """Route to ``mapping[router(state)]``.

    A key the router returns that is not in the mapping fails the run with
    ``GraphExecutionError``; there is no fallback.

    Raises:
        TypeError: the router is not callable, or a mapping value is not a node or ``END``.
    """
    if not callable(router):
        raise TypeError(f"branch() takes a callable router first, got {router!r}.")
    if not isinstance(mapping, Mapping) or not mapping:
        raise TypeError("branch(router, mapping) needs a non-empty dict of key -> node or END.")
    for t in mapping.values():
        _check_target(t, "branch()")
    return Branch(router, dict(mapping))


def _check_target(target: Any, where: str) -> None:
    if not (isinstance(target, Node) or target is END):
        raise TypeError(f"{where} targets must be nodes or END, got {target!r}.")


@dataclass(frozen=True, slots=True)
class Edge:
    """``source >> target``: what runs after ``source``."""

    source: Node | Terminal
    target: Any

    def __repr__(self) -> str:
        return f"{_label(self.source)} >> {_label(self.target)}"


def _label(x: Any) -> str:
    if isinstance(x, Node):
        return x.name
    if isinstance(x, Terminal):
        return x.name
    if isinstance(x, When):
        return f"when({_label(x.target)}, otherwise={_label(x.otherwise)})"
    if isinstance(x, Branch):
        return "branch(" + ", ".join(f"{k!r}: {_label(v)}" for k, v in x.mapping.items()) + ")"
    return repr(x)


class Send:
    """Run ``node`` as a task of its own with ``payload`` laid over its copy of the state.

    The payload skips reducers and is not kept in the state after the task. Each ``Send``
    is its own task in the next superstep.
    """

    __slots__ = ("node", "payload")

    def __init__(self, node: Node | str, payload: Mapping[str, Any] | BaseModel | None = None):
        if not isinstance(node, Node | str):
            raise TypeError(f"Send(node, payload) takes a node or a node name, got {node!r}.")
        self.node = node
        if payload is None:
            payload = {}
        elif isinstance(payload, BaseModel):
            payload = {k: getattr(payload, k) for k in payload.model_fields_set}
        elif not isinstance(payload, Mapping):
            raise TypeError(
                f"A Send payload is a dict of state fields, got {type(payload).__name__}."
            )
        self.payload: dict[str, Any] = dict(payload)

    @property
    def node_name(self) -> str:
        return self.node.name if isinstance(self.node, Node) else self.node

    def __repr__(self) -> str:
        return f"Send({self.node_name!r}, {self.payload!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Send)
            and other.node_name == self.node_name
            and other.payload == self.payload
        )

    __hash__ = None  # type: ignore[assignment]


class Command:
    """An update together with the next targets, returned by a node.

    Args:
        update: The update, as a node would return it (a dict), or ``None``.
        goto: ``None`` follows the node's edges; a node, a name, ``END``, a ``Send`` or a
            list of them replaces the edges for this run of the node; ``[]`` routes nowhere.
            Every target must be declared in ``@node(goto=[...])``.
    """

    __slots__ = ("goto", "update")

    def __init__(
        self,
        *,
        update: Mapping[str, Any] | BaseModel | None = None,
        goto: Node | str | Terminal | Send | Sequence[Node | str | Terminal | Send] | None = None,
    ) -> None:
        self.update = update
        if goto is None:
            self.goto: list[Any] | None = None
        elif isinstance(goto, Node | str | Terminal | Send):
            self.goto = [goto]
        else:
            self.goto = list(goto)

    def __repr__(self) -> str:
        return f"Command(update={self.update!r}, goto={self.goto!r})"
