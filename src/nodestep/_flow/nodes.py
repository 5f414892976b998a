"""Nodes: plain functions that read the state and return an update, and their context."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any, overload

from pydantic import BaseModel

from nodestep._errors import GraphConfigError
from nodestep._flow.cache_policy import CachePolicy
from nodestep._flow.context import NodeContext
from nodestep._flow.credentials import check_roles
from nodestep._flow.edges import END, Edge, Terminal, not_a_node
from nodestep._flow.resilience import CircuitBreaker, RetryPolicy, check_option
from nodestep._flow.signature import parameters
from nodestep._numbers import is_finite_number, shown_number

__all__ = ["Node", "NodeContext", "node"]


class Node:
    """A function wired into a graph, made by ``@node``.

    Calling a ``Node`` calls the function. ``a >> b`` makes an edge, ``a >> [b, c]`` a
    fan-out and ``[a, b] >> c`` a join.

    Attributes:
        name: The node's name: its identity in flows and in stored history.
        fn: The wrapped function.
        is_async: Whether the function is ``async def``.
        goto: The targets the node may choose at run time (``Command``/``Send``), as given.
        timeout: Seconds one run of the node may take, or ``None``.
        wants_ctx: Whether the function takes a ``NodeContext``.
        ctx_first: Whether the ``NodeContext`` is the first positional parameter.
        ctx_keyword: The name of a keyword-only ``NodeContext`` parameter, or ``None``.
        defer: Whether the node waits until nothing else is left to run in the turn.
        input_param: The parameter that gets the task input (see ``_flow.signature``).
        input_model: The pydantic model a ``Send`` payload to the node is validated
            against, or ``None``: then the payload is laid over the state.
        retry: The node's ``RetryPolicy``, or ``None``.
        breaker: The node's ``CircuitBreaker``, or ``None``.
        cache: How the node's results are reused (see ``CachePolicy``), or ``None``.
        guarded: Whether the node has a retry policy or a breaker.
        roles: The roles the node acts in, sorted: whose credentials it may ask for.
        private_state: The model of the node's private state, or ``None``.
        private_keyword: The parameter that gets the private state, or ``None``.
        state_check: A function that ``Graph.flow()`` calls with the graph's state class;
            it returns what the node needs of the state and the class lacks, with the fix,
            or ``None``. A node made by a library (``model_node``) sets it, so a state the
            node cannot work on is refused when the flow is declared, not in a run.
    """

    __slots__ = (
        "__weakref__",
        "breaker",
        "cache",
        "ctx_first",
        "ctx_keyword",
        "defer",
        "fn",
        "goto",
        "guarded",
        "input_model",
        "input_param",
        "is_async",
        "name",
        "private_keyword",
        "private_state",
        "retry",
        "roles",
        "state_check",
        "timeout",
        "wants_ctx",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        goto: Sequence[Any] | None = None,
        timeout: float | None = None,
        defer: bool = False,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        roles: Sequence[str] = (),
        private_state: type[BaseModel] | None = None,
        cache: CachePolicy | None = None,
    ) -> None:
        _check_function(fn)
        if name is None:
            name = getattr(fn, "__name__", "")
            if name == "<lambda>":
                raise TypeError("A lambda needs a name: use node(fn, name='my_node').")
        _check_name(name)
        if timeout is not None and not (is_finite_number(timeout) and timeout > 0):
            raise TypeError(
                f"@node(timeout=...) takes a positive number of seconds, got "
                f"{shown_number(timeout)}."
            )
        self.fn = fn
        self.name = name
        self.goto = () if goto is None else _checked_goto(goto, name)
        self.timeout = float(timeout) if timeout is not None else None
        self.is_async = inspect.iscoroutinefunction(fn)
        if not isinstance(defer, bool):
            raise TypeError(f"@node(defer=...) takes True or False, got {defer!r}.")
        self.defer = defer
        self.retry = check_option(retry, RetryPolicy, "retry", name)
        self.breaker = check_option(breaker, CircuitBreaker, "breaker", name)
        self.guarded = retry is not None or breaker is not None
        self.roles = check_roles(roles, name)
        self.private_state = _checked_private(private_state, name)
        if cache is not None and not isinstance(cache, CachePolicy):
            raise TypeError(
                f"@node(cache=...) takes a CachePolicy, got {cache!r}: e.g. "
                f"@node(cache=CachePolicy(ttl=60))."
            )
        self.cache = cache
        self.state_check: Callable[[type[BaseModel]], str | None] | None = None
        found = parameters(fn, name, self.private_state)
        self.wants_ctx, self.ctx_first = found.wants_ctx, found.ctx_first
        self.ctx_keyword = found.ctx_keyword
        self.private_keyword = found.private_keyword
        self.input_param, self.input_model = found.input_param, found.input_model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __rshift__(self, target: Any) -> Edge:
        return Edge(self, target)

    def __rrshift__(self, source: Any) -> Edge:
        if isinstance(source, list | tuple):  # ``[b, c] >> d``: a join, checked by flow()
            return Edge(source, self)
        # Reached for ``plain_function >> node``: functions have no ``>>`` of their own.
        raise TypeError(not_a_node(source, f"An edge to '{self.name}'") + ".")

    def __repr__(self) -> str:
        return f"<node {self.name}>"


def _checked_private(model: Any, name: str) -> type[BaseModel] | None:
    if model is None or (isinstance(model, type) and issubclass(model, BaseModel)):
        return model
    raise GraphConfigError(
        f"Node '{name}' got private_state={model!r}; private_state= takes a pydantic model "
        f"class whose fields all have defaults, e.g. class Memory(BaseModel): "
        f"notes: list[str] = []."
    )


_TASK_SUFFIX = re.compile(r"\[\d+\]$")


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"A node name must be a non-blank string, got {name!r}.")
    if name in ("START", "END"):
        raise TypeError(
            f"A node cannot be named {name!r}: it is the name of the flow's {name.lower()}. "
            f"Choose another name with @node(name=...)."
        )
    if _TASK_SUFFIX.search(name):
        base = name[: name.rindex("[")]
        raise TypeError(
            f"Node name {name!r} looks like the id of a task of node {base!r} (a node's "
            f"second task in a superstep is '{base}[1]'). Choose a name without a trailing "
            f"[number]."
        )


def _check_function(fn: Any) -> None:
    if isinstance(fn, Node):
        raise TypeError(f"{fn!r} is already a node; apply @node once.")
    if isinstance(fn, type):
        raise TypeError(
            f"@node takes a function or a bound method, not the class {fn.__name__}. "
            f"Write a function that creates and calls it."
        )
    if isinstance(fn, functools.partial):
        raise TypeError(
            "@node does not take functools.partial objects: a node's name is its stored "
            "identity. Write a small def that calls the function with its arguments."
        )
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise TypeError(
            f"@node takes a function or a bound method, got {type(fn).__name__!r}. "
            f"Callable instances are refused; decorate a method of the instance instead."
        )


def _checked_goto(goto: Any, name: str) -> tuple[Any, ...]:
    """Return the declared goto targets as a tuple, refusing what cannot be one."""
    if isinstance(goto, str | Node | Terminal) or not isinstance(goto, Sequence):
        shown = repr(goto) if isinstance(goto, str) else _target_label(goto)
        raise GraphConfigError(
            f"Node '{name}' got goto={goto!r}; goto= takes a list of targets, even for one: "
            f"@node(goto=[{shown}])."
        )
    if not goto:
        raise GraphConfigError(
            f"Node '{name}' got goto={goto!r}, which declares no target; leave goto= out for a "
            f"node that routes only by its edges, or list the nodes it may route to."
        )
    for target in goto:
        if isinstance(target, Node | str) or target is END:
            continue
        if inspect.isfunction(target) or inspect.ismethod(target):
            what = not_a_node(target, f"Node '{name}' declares a goto target that")
        else:
            what = f"Node '{name}' declares the goto target {target!r}, which is not a node"
        raise GraphConfigError(
            f"{what}. goto= takes nodes, node names (a node defined later, or the node "
            f"itself) and END."
        )
    return tuple(goto)


def _target_label(target: Any) -> str:
    name = getattr(target, "name", None)
    return name if isinstance(name, str) else "target"


@overload
def node(fn: Callable[..., Any], /) -> Node: ...


@overload
def node(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = ...,
    goto: Sequence[Any] | None = ...,
    timeout: float | None = ...,
    defer: bool = ...,
    retry: RetryPolicy | None = ...,
    breaker: CircuitBreaker | None = ...,
    roles: Sequence[str] = ...,
    private_state: type[BaseModel] | None = ...,
    cache: CachePolicy | None = ...,
) -> Node: ...


@overload
def node(
    *,
    name: str | None = ...,
    goto: Sequence[Any] | None = ...,
    timeout: float | None = ...,
    defer: bool = ...,
    retry: RetryPolicy | None = ...,
    breaker: CircuitBreaker | None = ...,
    roles: Sequence[str] = ...,
    private_state: type[BaseModel] | None = ...,
    cache: CachePolicy | None = ...,
) -> Callable[[Callable[..., Any]], Node]: ...


def node(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    goto: Sequence[Any] | None = None,
    timeout: float | None = None,
    defer: bool = False,
    retry: RetryPolicy | None = None,
    breaker: CircuitBreaker | None = None,
    roles: Sequence[str] = (),
    private_state: type[BaseModel] | None = None,
    cache: CachePolicy | None = None,
) -> Node | Callable[[Callable[..., Any]], Node]:
    """Make a function a graph node.

    Use it bare (``@node``), with options (``@node(name=..., goto=[...], timeout=...)``), or
    as a call (``node(fn, name="n1")``). ``async def`` and plain ``def`` functions and bound
    methods work; classes, callable instances and ``functools.partial`` raise ``TypeError``.

    The function takes the state first. A parameter annotated ``NodeContext``, under any
    name, positional or keyword-only, gets the run's context. A parameter annotated with a
    pydantic model gets the task's input: the payload of the ``Send`` that started the task,
    validated against that model (see ``docs/joins.md``). Every other parameter needs a
    default: the checks run here, when the node is made, not in the middle of a run.

    Args:
        fn: The function.
        name: The node's name; defaults to the function's ``__name__``.
        goto: A list of every node (or ``END``) the node may route to with
            ``Command(goto=...)`` or ``Send``. A string names a node defined later, or the
            node itself.
        timeout: Seconds one run may take. An async node is cancelled at the limit; a plain
            ``def`` node's thread cannot be stopped, so its ``NodeTimeoutError`` is raised
            when the function returns. With ``retry=``, each attempt gets the limit afresh.
        defer: Hold the node's tasks until nothing else is left to run in the turn: for a
            summary after a map-reduce, say.
        retry: A ``RetryPolicy``: run the task again when it fails (see resilience docs).
        breaker: A ``CircuitBreaker``: fail fast while the node keeps failing.
        roles: The roles whose credentials the node may ask for, ``ctx.credentials(role)``.
        private_state: A pydantic model of state only this node reads and writes; a
            parameter annotated with it gets the thread's copy (see node state docs).
        cache: A ``CachePolicy``: reuse the node's result for the same input (see the node
            cache docs).

    Returns:
        The ``Node``, or a decorator that makes one.

    Raises:
        TypeError: ``fn`` is not a function or bound method, or the name or timeout is bad.
        GraphConfigError: a required parameter that is neither the state nor annotated
            ``NodeContext``, two ``NodeContext`` parameters, or a ``goto`` that is not a
            non-empty list of nodes, node names and ``END``.
    """
    options: dict[str, Any] = {"name": name, "goto": goto, "timeout": timeout, "defer": defer}
    options.update(retry=retry, breaker=breaker, roles=roles, private_state=private_state)
    options["cache"] = cache
    if fn is None:
        return lambda f: Node(f, **options)
    return Node(fn, **options)
