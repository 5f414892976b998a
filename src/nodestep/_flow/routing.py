"""Routes: how a flow chooses what runs next, on an edge or in what a node returns.

``a >> when(...)`` and ``a >> branch(...)`` choose on the state after a superstep; a node
chooses itself by returning ``Command(goto=...)`` or ``Send(...)``. Like edges, routes are
data: nothing here runs a node, so a loader can build the same objects from a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.condition import CompiledCondition, Condition
from nodestep._display.text import short_repr
from nodestep._flow.edges import END, Edge, Terminal, label, not_a_node
from nodestep._flow.nodes import Node

__all__ = ["PARENT", "Branch", "Command", "Send", "When", "branch", "when"]


@dataclass(frozen=True, slots=True)
class When:
    """A two-way route: ``target`` when the predicate holds, else ``otherwise``.

    ``predicate`` is a Python function of the state, or a ``Condition`` (a ``when`` string),
    which ``Graph.flow()`` checks against the state and compiles. ``otherwise`` may be
    another ``When``: a chain takes the first target whose condition holds.
    ``context`` and ``functions`` are what a condition may read besides the state.
    """

    predicate: Callable[[Any], bool] | Condition | CompiledCondition
    target: Node | Terminal
    otherwise: Node | Terminal | When
    context: Any = field(default=None, compare=False)
    functions: Mapping[str, Callable[..., Any]] | None = field(default=None, compare=False)

    def targets(self) -> list[Node | Terminal]:
        """Every target of the chain, in order."""
        rest = self.otherwise.targets() if isinstance(self.otherwise, When) else [self.otherwise]
        return [self.target, *rest]

    def links(self) -> list[When]:
        """The ``When`` links of the chain, in order."""
        return [self, *(self.otherwise.links() if isinstance(self.otherwise, When) else [])]

    def fallback(self) -> Node | Terminal:
        """The target when no condition of the chain holds."""
        return self.otherwise.fallback() if isinstance(self.otherwise, When) else self.otherwise

    def __rrshift__(self, source: Any) -> Edge:
        return _edge_to_route(source, self)

    def describe(self) -> str:
        return f"when({label(self.target)}, otherwise={label(self.otherwise)})"


@dataclass(frozen=True, slots=True)
class Branch:
    """A many-way route: ``mapping[router(state)]`` runs next."""

    router: Callable[[Any], Any]
    mapping: Mapping[Any, Node | Terminal]

    def targets(self) -> list[Node | Terminal]:
        return list(self.mapping.values())

    def __rrshift__(self, source: Any) -> Edge:
        return _edge_to_route(source, self)

    def describe(self) -> str:
        return "branch(" + ", ".join(f"{k!r}: {label(v)}" for k, v in self.mapping.items()) + ")"


def _edge_to_route(source: Any, route: When | Branch) -> Edge:
    """``[b, c] >> when(...)``: an edge that ``flow()`` refuses, with the fix, among the rest."""
    if isinstance(source, list | tuple):
        return Edge(source, route)
    raise TypeError(not_a_node(source, f"The edge to {route.describe()}") + ".")


_NOT_GIVEN: Any = object()


def when(
    predicate: Callable[[Any], bool] | str | Condition,
    target: Node | Terminal,
    otherwise: Node | Terminal | When = _NOT_GIVEN,
    *,
    context: Any = None,
    functions: Mapping[str, Callable[..., Any]] | None = None,
) -> When:
    """Route to ``target`` when ``predicate`` holds, else to ``otherwise``.

    The predicate is a function that gets the merged state after the superstep and returns
    a ``bool``, or a condition string such as ``"retry_count < 3"`` (see the conditions
    docs), parsed here and checked against the state when the flow compiles. A condition
    with ``$is_error(...)`` (or ``failed(...)``) also takes the node's failure: the run
    goes on at ``target`` instead of failing. ``otherwise`` may be another ``when(...)``.

    Args:
        predicate: A function of the state, a condition string or a ``Condition``.
        target: The node (or ``END``) to run when it holds.
        otherwise: The node, ``END`` or ``when(...)`` to follow when it does not.
        context: The type of the run's ``context=`` a condition reads (a model class), so
            ``context`` names are checked when the flow compiles; ``None``: not declared.
        functions: The functions a condition may call, by dotted name.

    Raises:
        TypeError: ``otherwise=`` is missing, or a target is not a node or ``END``.
        ConditionError: the condition string does not parse.
    """
    if otherwise is _NOT_GIVEN:
        raise TypeError(
            "when(predicate, target) needs otherwise=...: the node to run when the predicate "
            "is false (or END)."
        )
    if isinstance(predicate, str):
        predicate = Condition(predicate)
    elif not isinstance(predicate, Condition):
        if not callable(predicate):
            raise TypeError(
                f"when() takes a callable predicate or a condition string first, got {predicate!r}."
            )
        if context is not None or functions is not None:
            raise TypeError(
                "when() got context= or functions= with a Python predicate; context= and "
                "functions= are for condition strings. Leave them out, or write the "
                "predicate as a condition string."
            )
    _check_target(target, "when()")
    if not isinstance(otherwise, When):
        _check_target(otherwise, "when()")
    return When(predicate, target, otherwise, context, functions)


def branch(router: Callable[[Any], Any], mapping: Mapping[Any, Node | Terminal]) -> Branch:
    """Route to ``mapping[router(state)]``.

    A router that returns a list of keys (as a LangGraph router may) routes to each of
    their targets, which the mapping declares like any other. A key the router returns that
    is not in the mapping fails the run with ``GraphExecutionError``; there is no fallback.

    Raises:
        TypeError: the router is not callable, or a mapping value is not a node or ``END``.
    """
    if not callable(router):
        raise TypeError(f"branch() takes a callable router first, got {router!r}.")
    if not isinstance(mapping, Mapping) or not mapping:
        # A LangGraph path_map may be a list of node names; here every key is explicit.
        listed = " (a LangGraph list ['b', 'c'] is {'b': b, 'c': c} here)"
        raise TypeError(
            f"branch(router, mapping) needs a non-empty dict of key -> node or END, got "
            f"{short_repr(mapping)}. Map each key the router returns to its target, e.g. "
            f"{{'refund': refund, 'done': END}}"
            f"{listed if isinstance(mapping, list | tuple) and mapping else ''}."
        )
    for t in mapping.values():
        _check_target(t, "branch()")
    return Branch(router, dict(mapping))


def _targets(goto: Any) -> list[Any]:
    """Return the targets of ``Command(goto=goto)`` given as a tuple or another iterable.

    Raises:
        TypeError: ``goto`` is no target and no iterable of them (a number: ``list()``
            would say only "'int' object is not iterable"), or bytes or a mapping, whose
            items (byte values, keys) would be taken for targets.
    """
    if isinstance(goto, bytes | bytearray | Mapping) or not isinstance(goto, Iterable):
        raise TypeError(
            f"Command(goto=...) takes a node, a node name, END, a Send, or a list of them; "
            f"got {short_repr(goto)} ({type(goto).__name__}). Write e.g. goto='review' or "
            f"goto=[Send(work, {{...}}), Send(work, {{...}})]."
        )
    return list(goto)


def _check_target(target: Any, where: str) -> None:
    if isinstance(target, Node) or target is END:
        return
    if callable(target) and not isinstance(target, type | Terminal):
        raise TypeError(f"{where} targets must be nodes or END: " + not_a_node(target, where))
    fix = ""
    if isinstance(target, str):  # a LangGraph habit: targets named by text
        fix = (
            " Use END itself (from nodestep import END)."
            if target in ("END", "__end__")
            else f" A target is the node itself (the function decorated with @node), not its "
            f"name: write the node named {target!r} without quotes."
        )
    raise TypeError(f"{where} targets must be nodes or END, got {target!r}.{fix}")


class Send:
    """Run ``node`` as a task of its own with ``payload`` laid over its copy of the state.

    The payload skips reducers and is not kept in the state after the task. Each ``Send``
    is its own task in the next superstep. ``node`` is a node or its name, as a
    ``Command(goto=...)`` target is: one rule for both. The sending node declares the
    target in ``@node(goto=[...])``, which ``flow()`` checks; the run checks that a node
    object is the flow's node of that name, and that a name is declared.

    Raises:
        TypeError: ``node`` is neither a node nor a node name (``END`` is no task), or the
            payload is not a dict or a model.
    """

    __slots__ = ("node", "payload")

    def __init__(
        self, node: Node | str, payload: Mapping[str, Any] | BaseModel | None = None
    ) -> None:
        if isinstance(node, str):
            if not node.strip() or node in ("START", "END"):
                raise TypeError(
                    f"Send({node!r}, ...) names no node: a Send starts a task of a node, so "
                    f"it takes a node or a node's name (END is no task: route to it with "
                    f"Command(goto=END))."
                )
        elif not isinstance(node, Node):
            raise TypeError(
                f"Send(node, payload) takes a node made with @node or its name, got "
                f"{node!r}. To send to a graph, make it a node with subgraph(name, graph) "
                f"and use that node in the flow and in Send."
            )
        self.node: Node | str = node
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
        """The target node's name."""
        return self.node if isinstance(self.node, str) else self.node.name

    def __repr__(self) -> str:
        return f"Send({self.node_name!r}, {short_repr(self.payload)})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Send)
            and other.node_name == self.node_name
            and other.payload == self.payload
        )

    __hash__ = None  # type: ignore[assignment]


class _Parent:
    """The type of ``PARENT``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PARENT"

    def __reduce__(self) -> str:
        return "PARENT"


PARENT = _Parent()
"""``Command(graph=PARENT, ...)``: the command is for the graph that runs this one as a
subgraph: its update and goto apply to the parent's state and nodes."""


_TARGETS = (Node, str, Terminal, Send)
"""What ``Command(goto=...)`` takes as one target (a tuple: a union is built per call)."""


def _check_update(update: Any) -> None:
    """Refuse a ``Command(update=...)`` that is neither ``None`` nor a mapping of fields."""
    if isinstance(update, BaseModel):
        name = type(update).__name__
        raise TypeError(
            f"Command(update=...) takes a dict of the fields to change, got a {name} "
            f"instance. Pass a dict, e.g. Command(update={{'field': value}}); for a model, "
            f"update=model.model_dump(exclude_unset=True) keeps the fields set on it."
        )
    if update is not None and not isinstance(update, Mapping):
        raise TypeError(
            f"Command(update=...) takes a dict of the fields to change, got "
            f"{type(update).__name__}."
        )


class Command:
    """An update together with the next targets, returned by a node; or answers, as input.

    A node returns ``Command(update=..., goto=...)``. A caller passes
    ``Command(resume=...)`` as the input of ``invoke``/``stream`` to answer a paused
    thread: ``invoke(Command(resume=value), thread_id=...)`` is
    ``invoke(None, thread_id=..., resume=Resume(value))``.

    Args:
        update: The update, as a node would return it (a dict of fields), or ``None``.
        goto: ``None`` follows the node's edges; a node, a name, ``END``, a ``Send`` or a
            list of them replaces the edges for this run of the node; ``[]`` routes nowhere.
            Every target must be declared in ``@node(goto=[...])``.
        resume: As input only: the answer to the only pending interrupt, or a ``Resume``
            (``Resume(answers={key: value})`` answers several). ``None`` means no answer;
            answer ``None`` itself with ``Resume(None)``.
        graph: ``None`` for this graph; ``PARENT`` ends the subgraph run this node is part
            of and applies the update and goto in the graph that runs it, as if the
            subgraph's node there returned them (its ``subgraph(goto=[...])`` declares the
            targets).

    Raises:
        TypeError: ``update`` is not a dict (a model instance included: it would say
            nothing about which fields the node means to change), or ``graph`` is neither
            ``None`` nor ``PARENT``.
    """

    __slots__ = ("goto", "graph", "resume", "update")

    def __init__(
        self,
        *,
        update: Mapping[str, Any] | None = None,
        goto: Node | str | Terminal | Send | Sequence[Node | str | Terminal | Send] | None = None,
        resume: Any = None,
        graph: _Parent | None = None,
    ) -> None:
        if graph is not None and graph is not PARENT:
            raise TypeError(
                f"Command(graph=...) takes PARENT (from nodestep), or None for this graph; "
                f"got {graph!r}."
            )
        self.graph = graph
        # A dict, the usual update, skips the two checks below: each is an ABC's
        # ``isinstance``, written in Python, and a node returns a Command every step.
        if type(update) is not dict:
            _check_update(update)
        self.update = update
        self.resume = resume
        if goto is None:
            self.goto: list[Any] | None = None
        elif isinstance(goto, _TARGETS):
            self.goto = [goto]
        elif type(goto) is list:  # the usual several targets: no ABC checks
            self.goto = list(goto)
        else:
            self.goto = _targets(goto)

    def __repr__(self) -> str:
        shown = f"update={short_repr(self.update)}, goto={short_repr(self.goto)}"
        if self.resume is not None:
            shown += f", resume={short_repr(self.resume)}"
        if self.graph is not None:
            shown += ", graph=PARENT"
        return f"Command({shown})"
