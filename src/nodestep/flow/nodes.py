"""Nodes: plain functions that read the state and return an update, and their context."""

from __future__ import annotations

import functools
import inspect
import math
import re
import typing
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, overload

from nodestep.errors import ContextNotProvidedError
from nodestep.flow.edges import Edge, not_a_node

__all__ = ["Node", "NodeContext", "node"]

_NO_CONTEXT: Any = object()


class NodeContext:
    """What a node knows about the run it is part of.

    A node gets it by declaring a parameter annotated ``NodeContext``, under any name.

    Attributes:
        graph_name: The graph's name.
        node: The node's name.
        run_id: The id of this call of ``invoke``/``stream``.
        thread_id: The thread of the run.
        branch_id: The history branch of the run.
        step: The superstep, counted from 0.
        task_id: The task's id: the node name, then ``name[1]``, ``name[2]`` for further
            tasks of the node in the same superstep.
        cache: A dict that survives a pause of this task (see interrupts); empty otherwise.
    """

    __slots__ = (
        "_context",
        "_emit",
        "branch_id",
        "cache",
        "graph_name",
        "node",
        "run_id",
        "step",
        "task_id",
        "thread_id",
    )

    def __init__(
        self,
        *,
        graph_name: str,
        node: str,
        run_id: str,
        thread_id: str,
        branch_id: str,
        step: int,
        task_id: str,
        context: Any = _NO_CONTEXT,
        cache: dict[str, Any] | None = None,
        emit: Callable[[Any], None] | None = None,
    ) -> None:
        self.graph_name = graph_name
        self.node = node
        self.run_id = run_id
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.step = step
        self.task_id = task_id
        self.cache: dict[str, Any] = cache if cache is not None else {}
        self._context = context
        self._emit = emit

    @property
    def context(self) -> Any:
        """The ``context=`` object of the run; it is never stored.

        Raises:
            ContextNotProvidedError: the run was started without ``context=``.
        """
        if self._context is _NO_CONTEXT:
            raise ContextNotProvidedError(
                f"Node '{self.node}' read ctx.context, but the run got no context. Pass "
                f"context=... to invoke/ainvoke/stream/astream (and again when resuming: the "
                f"context is never stored)."
            )
        return self._context

    def emit(self, data: Any) -> None:
        """Send ``data`` as a ``"custom"`` stream event; a no-op when nobody streams it."""
        if self._emit is not None:
            self._emit(data)

    def __repr__(self) -> str:
        return (
            f"NodeContext(node={self.node!r}, step={self.step}, task_id={self.task_id!r}, "
            f"thread_id={self.thread_id!r}, branch_id={self.branch_id!r})"
        )


def _is_context_annotation(annotation: Any) -> bool:
    if annotation is NodeContext:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "NodeContext"


class Node:
    """A function wired into a graph, made by ``@node``.

    Calling a ``Node`` calls the function. ``a >> b`` makes an edge.

    Attributes:
        name: The node's name: its identity in flows and in stored history.
        fn: The wrapped function.
        is_async: Whether the function is ``async def``.
        goto: The targets the node may choose at run time (``Command``/``Send``), as given.
        timeout: Seconds one run of the node may take, or ``None``.
    """

    __slots__ = (
        "__weakref__",
        "ctx_first",
        "fn",
        "goto",
        "is_async",
        "name",
        "timeout",
        "wants_ctx",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        goto: Sequence[Any] = (),
        timeout: float | None = None,
    ) -> None:
        _check_function(fn)
        if name is None:
            name = getattr(fn, "__name__", "")
            if name == "<lambda>":
                raise TypeError("A lambda needs a name: use node(fn, name='my_node').")
        _check_name(name)
        if timeout is not None and (
            not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0
        ):
            raise TypeError(
                f"@node(timeout=...) takes a positive number of seconds, got {timeout!r}."
            )
        if isinstance(goto, str | Node) or not isinstance(goto, Sequence):
            goto = [goto]
        self.fn = fn
        self.name = name
        self.goto = tuple(goto)
        self.timeout = float(timeout) if timeout is not None else None
        self.is_async = inspect.iscoroutinefunction(fn)
        self.wants_ctx, self.ctx_first = _context_position(fn, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __rshift__(self, target: Any) -> Edge:
        return Edge(self, target)

    def __rrshift__(self, source: Any) -> NoReturn:
        # Reached for ``plain_function >> node``: functions have no ``>>`` of their own.
        raise TypeError(not_a_node(source, f"An edge to '{self.name}'") + ".")

    def __repr__(self) -> str:
        return f"<node {self.name}>"


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


def _context_position(fn: Callable[..., Any], name: str) -> tuple[bool, bool]:
    """Return (wants a NodeContext, the context comes first)."""
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind in kinds]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    ctx_index = [
        i
        for i, p in enumerate(positional)
        if _is_context_annotation(hints.get(p.name, p.annotation))
    ]
    if len(required) > 2 or not positional or (len(positional) == 1 and ctx_index):
        raise TypeError(
            f"Node '{name}' must take the state as its first parameter, and optionally a "
            f"parameter annotated NodeContext: def {name}(state, ctx: NodeContext)."
        )
    if not ctx_index:
        if len(required) > 1:
            raise TypeError(
                f"Node '{name}' takes two parameters but neither is annotated NodeContext; "
                f"annotate the context parameter, e.g. ctx: NodeContext."
            )
        return False, False
    return True, ctx_index[0] == 0


@overload
def node(fn: Callable[..., Any], /) -> Node: ...


@overload
def node(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = ...,
    goto: Sequence[Any] = ...,
    timeout: float | None = ...,
) -> Node: ...


@overload
def node(
    *,
    name: str | None = ...,
    goto: Sequence[Any] = ...,
    timeout: float | None = ...,
) -> Callable[[Callable[..., Any]], Node]: ...


def node(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    goto: Sequence[Any] = (),
    timeout: float | None = None,
) -> Node | Callable[[Callable[..., Any]], Node]:
    """Make a function a graph node.

    Use it bare (``@node``), with options (``@node(name=..., goto=[...], timeout=...)``), or
    as a call (``node(fn, name="n1")``). ``async def`` and plain ``def`` functions and bound
    methods work; classes, callable instances and ``functools.partial`` raise ``TypeError``.

    Args:
        fn: The function.
        name: The node's name; defaults to the function's ``__name__``.
        goto: Every node (or ``END``) the node may route to with ``Command(goto=...)`` or
            ``Send``. A string names a node defined later, or the node itself.
        timeout: Seconds one run may take. An async node is cancelled at the limit; a plain
            ``def`` node's thread cannot be stopped, so its ``NodeTimeoutError`` is raised
            when the function returns.

    Returns:
        The ``Node``, or a decorator that makes one.
    """
    if fn is None:
        return lambda f: Node(f, name=name, goto=goto, timeout=timeout)
    return Node(fn, name=name, goto=goto, timeout=timeout)
