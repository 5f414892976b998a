"""Nodes: plain functions that read the state and return an update, and their context."""

from __future__ import annotations

import functools
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, overload

from nodestep.conditions import NO_CONTEXT
from nodestep.errors import ContextNotProvidedError, GraphConfigError
from nodestep.flow.edges import END, Edge, Terminal, not_a_node

__all__ = ["Node", "NodeContext", "node"]

# The conditions' marker, so a condition can tell a run without context from one with None.
_NO_CONTEXT: Any = NO_CONTEXT


class NodeContext:
    """What a node knows about the run it is part of.

    A node gets it by declaring a parameter annotated ``NodeContext``, under any name,
    positional (before or after the state) or keyword-only.

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
    """Tell whether a parameter's annotation asks for the context.

    ``NodeContext | None`` counts too (a default of ``None`` lets tests call the function
    directly). A string annotation that could not be resolved is matched by name.
    """
    if annotation is NodeContext:
        return True
    if isinstance(annotation, str):
        parts = [p.strip() for p in annotation.split("|")]
        names = [p.split(".")[-1] for p in parts if p != "None"]
        return names == ["NodeContext"]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        return [a for a in args if a is not type(None)] == [NodeContext]
    return False


class Node:
    """A function wired into a graph, made by ``@node``.

    Calling a ``Node`` calls the function. ``a >> b`` makes an edge.

    Attributes:
        name: The node's name: its identity in flows and in stored history.
        fn: The wrapped function.
        is_async: Whether the function is ``async def``.
        goto: The targets the node may choose at run time (``Command``/``Send``), as given.
        timeout: Seconds one run of the node may take, or ``None``.
        wants_ctx: Whether the function takes a ``NodeContext``.
        ctx_first: Whether the ``NodeContext`` is the first positional parameter.
        ctx_keyword: The name of a keyword-only ``NodeContext`` parameter, or ``None``.
    """

    __slots__ = (
        "__weakref__",
        "ctx_first",
        "ctx_keyword",
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
        goto: Sequence[Any] | None = None,
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
        self.fn = fn
        self.name = name
        self.goto = () if goto is None else _checked_goto(goto, name)
        self.timeout = float(timeout) if timeout is not None else None
        self.is_async = inspect.iscoroutinefunction(fn)
        self.wants_ctx, self.ctx_first, self.ctx_keyword = _context_position(fn, name)

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


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _context_position(fn: Callable[..., Any], name: str) -> tuple[bool, bool, str | None]:
    """Return (wants a NodeContext, it comes first, the keyword it is passed by).

    Raises:
        GraphConfigError: a parameter nodestep cannot fill, or no parameter for the state.
    """
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        # An annotation that cannot be resolved (a local class under ``from __future__
        # import annotations``) leaves the string, which is matched by its last dotted part.
        hints = {}
    annotations = {p.name: hints.get(p.name, p.annotation) for p in params}
    ctx = [p for p in params if _is_context_annotation(annotations[p.name])]
    positional = [p for p in params if p.kind in _POSITIONAL]
    if len(ctx) > 1:
        shown = ", ".join(f"'{p.name}'" for p in ctx)
        raise GraphConfigError(
            f"Node '{name}' has {len(ctx)} parameters annotated NodeContext ({shown}); it gets "
            f"one context, so keep one of them."
        )
    state = [p for p in positional if p not in ctx][:1]
    if not state:
        raise GraphConfigError(
            f"Node '{name}' must take the state as its first parameter, and optionally a "
            f"parameter annotated NodeContext: def {name}(state, ctx: NodeContext)."
        )
    context = ctx[0] if ctx else None
    if context is not None and context.kind in _POSITIONAL and positional.index(context) > 1:
        raise GraphConfigError(
            f"Node '{name}' takes its NodeContext parameter '{context.name}' as positional "
            f"parameter {positional.index(context) + 1}, where the context would land in "
            f"another parameter; put it right before or after the state, or make it "
            f"keyword-only: def {name}(state, *, {context.name}: NodeContext)."
        )
    for p in params:
        if p is state[0] or p is context or p.default is not inspect.Parameter.empty:
            continue
        if p.kind in _POSITIONAL or p.kind is inspect.Parameter.KEYWORD_ONLY:
            _refuse_parameter(name, p, annotations[p.name])
    if context is None:
        return False, False, None
    if context.kind is inspect.Parameter.KEYWORD_ONLY:
        return True, False, context.name
    return True, positional.index(context) == 0, None


def _refuse_parameter(name: str, p: inspect.Parameter, annotation: Any) -> NoReturn:
    """Refuse a required parameter nodestep has no value for, with the fix."""
    if annotation is inspect.Parameter.empty:
        how = "has no annotation"
    else:
        shown = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        how = f"is annotated {shown or repr(annotation)}"
    keyword = p.kind is inspect.Parameter.KEYWORD_ONLY
    kind = "keyword-only parameter" if keyword else "parameter"
    fix = f"*, {p.name}: NodeContext" if keyword else f"{p.name}: NodeContext"
    raise GraphConfigError(
        f"Node '{name}' has the required {kind} '{p.name}', which {how}; a node gets only the "
        f"state and, by its NodeContext annotation, the context. Annotate it as the context "
        f"(def {name}(state, {fix})), give it a default, or remove it."
    )


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
) -> Node: ...


@overload
def node(
    *,
    name: str | None = ...,
    goto: Sequence[Any] | None = ...,
    timeout: float | None = ...,
) -> Callable[[Callable[..., Any]], Node]: ...


def node(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    goto: Sequence[Any] | None = None,
    timeout: float | None = None,
) -> Node | Callable[[Callable[..., Any]], Node]:
    """Make a function a graph node.

    Use it bare (``@node``), with options (``@node(name=..., goto=[...], timeout=...)``), or
    as a call (``node(fn, name="n1")``). ``async def`` and plain ``def`` functions and bound
    methods work; classes, callable instances and ``functools.partial`` raise ``TypeError``.

    The function takes the state first. A parameter annotated ``NodeContext``, under any
    name, positional or keyword-only, gets the run's context. Every other parameter needs a
    default: the checks run here, when the node is made, not in the middle of a run.

    Args:
        fn: The function.
        name: The node's name; defaults to the function's ``__name__``.
        goto: A list of every node (or ``END``) the node may route to with
            ``Command(goto=...)`` or ``Send``. A string names a node defined later, or the
            node itself.
        timeout: Seconds one run may take. An async node is cancelled at the limit; a plain
            ``def`` node's thread cannot be stopped, so its ``NodeTimeoutError`` is raised
            when the function returns.

    Returns:
        The ``Node``, or a decorator that makes one.

    Raises:
        TypeError: ``fn`` is not a function or bound method, or the name or timeout is bad.
        GraphConfigError: a required parameter that is neither the state nor annotated
            ``NodeContext``, two ``NodeContext`` parameters, or a ``goto`` that is not a
            non-empty list of nodes, node names and ``END``.
    """
    if fn is None:
        return lambda f: Node(f, name=name, goto=goto, timeout=timeout)
    return Node(fn, name=name, goto=goto, timeout=timeout)
