"""``Middleware``: hooks that run the user's code around a run, a node, a model and a tool.

A middleware is a class with some of the hooks of ``HOOKS``; a graph takes a list of them
(``Graph(..., middleware=[...])``). The order is the list's: ``before_*`` hooks run first to
last, ``after_*`` hooks and the observers (``on_*``) last to first, so the first middleware
wraps the others as the outermost layer.

Why the hooks are checked when the class is made: a misspelled hook (``after_tools``) would
otherwise never be called, silently. Why a hook's error is wrapped: the run's error then
names the middleware class and the hook, which a traceback through the engine hides; the
hook's own exception is its ``__cause__``. A hook runs before the step's writes are made,
so a hook that raises fails its task and nothing of the step is stored.

This module is the core's half (run and node hooks, the runner); the model and tool hooks'
contexts are the agents' (``nodestep.agents._middleware``), built on these classes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from nodestep._display.text import fields_repr
from nodestep._errors import GraphConfigError, GraphExecutionError

__all__ = [
    "HOOKS",
    "GraphMiddlewareContext",
    "Middleware",
    "MiddlewareError",
    "NodeMiddlewareContext",
    "Replacement",
    "RunOutcome",
    "active_middleware",
    "check_middleware",
    "run_hooks",
    "run_hooks_sync",
    "sync_hooks",
]

HOOKS = frozenset(
    {
        "before_graph",
        "after_graph",
        "on_run_end",
        "before_node",
        "after_node",
        "on_error",
        "on_interrupt",
        "before_model",
        "after_model",
        "on_model_error",
        "before_tool",
        "after_tool",
        "on_tool_error",
    }
)

_PREFIXES = ("before_", "after_", "on_")


class MiddlewareError(GraphExecutionError):
    """A middleware's hook raised, or returned what its hook cannot take.

    Attributes:
        middleware: The middleware's class name.
        hook: The hook's name.
    """

    def __init__(self, message: str, middleware: str = "", hook: str = "") -> None:
        super().__init__(message)
        self.middleware = middleware
        self.hook = hook


@dataclass(frozen=True, slots=True)
class Replacement:
    """What a hook returns to put ``value`` in place of what it was given.

    Made by ``ctx.replace(value)``; a hook that returns ``None`` leaves things as they are.

    Attributes:
        value: The replacement.
    """

    value: Any

    def __repr__(self) -> str:
        return fields_repr(self, ("value",))


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended, as ``on_run_end`` sees it.

    Attributes:
        status: ``"completed"``, ``"paused"``, ``"failed"`` or ``"cancelled"``.
        interrupts: The pending interrupts by key; empty unless the run paused.
        error: What the run raised, when it failed; else ``None``.
    """

    status: Literal["completed", "paused", "failed", "cancelled"]
    interrupts: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    def __repr__(self) -> str:
        return fields_repr(self, ("status", "interrupts", "error"))


@dataclass(slots=True)
class GraphMiddlewareContext:
    """What a run hook (``before_graph``, ``after_graph``, ``on_run_end``) knows.

    Attributes:
        graph_name: The graph's name.
        thread_id: The run's thread, or ``None`` before the run picked one.
        state: The state: the input in ``before_graph``, the last state after; a value to
            read, never the stored one.
    """

    graph_name: str
    thread_id: str | None
    state: Any = None

    def __repr__(self) -> str:
        return fields_repr(self, ("graph_name", "thread_id", "state"))


@dataclass(slots=True)
class NodeMiddlewareContext:
    """What a node hook knows: the node, its task, the state and (after) its update.

    Attributes:
        graph_name: The graph's name.
        node_name: The node's name.
        run_id: The id of the run.
        thread_id: The run's thread.
        step: The superstep, from 0.
        task_id: The task's id.
        state: The state the node reads (``before_node`` may replace it for this call;
            the stored state never changes).
        update: What the node returned (in ``after_node``), else ``None``.
    """

    graph_name: str
    node_name: str
    run_id: str
    thread_id: str
    step: int
    task_id: str
    state: Any = None
    update: Any = None

    def __repr__(self) -> str:
        return fields_repr(self, ("node_name", "task_id", "state", "update"))

    def replace(self, value: Any) -> Replacement:
        """Return the ``Replacement`` that puts ``value`` in place of what the hook got."""
        return Replacement(value)


class Middleware:
    """Base class of middleware: override the hooks you need, ``def`` or ``async def``.

    The hooks (each optional; the context classes say what each one sees):

    - ``before_graph(ctx)``, ``after_graph(ctx)``: around a run (``after_graph`` only when
      it completes); ``on_run_end(ctx, outcome)`` once at every end, with a ``RunOutcome``.
    - ``before_node(ctx)`` may return ``ctx.replace(state)``; ``after_node(ctx)`` may return
      ``ctx.replace(update)``; ``on_error(ctx, error)`` may return ``ctx.replace(update)`` to
      use instead of the failure; ``on_interrupt(ctx, payload)`` sees a node pause.
    - ``before_model``, ``after_model``, ``on_model_error``, ``before_tool``,
      ``after_tool``, ``on_tool_error``: around the model and tool nodes of
      ``nodestep.agents`` (see ``ModelMiddlewareContext`` and ``ToolMiddlewareContext``).

    ``tools()`` returns tools the middleware offers; ``create_react_agent`` adds them.

    Raises:
        TypeError: when a subclass is defined with a method named like a hook
            (``before_*``, ``after_*``, ``on_*``) that is not one, e.g. ``after_tools``.
    """

    # The hooks a class defines (its own or inherited), found once when it is made: the
    # runner asks for every hook it may call, so a middleware pays only for its hooks.
    _defined: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._defined = frozenset(name for name in HOOKS if getattr(cls, name, None) is not None)
        wrong = sorted(
            name
            for name, value in vars(cls).items()
            if name.startswith(_PREFIXES) and callable(value) and name not in HOOKS
        )
        if wrong:
            raise TypeError(
                f"Middleware {cls.__name__} defines {', '.join(wrong)}, which "
                f"{'is not a hook' if len(wrong) == 1 else 'are not hooks'}; the hooks are "
                f"{', '.join(sorted(HOOKS))}. Rename it, or give a helper a name that does "
                f"not start with before_, after_ or on_."
            )

    def tools(self) -> list[Any]:
        """Return the tools this middleware offers the model; none by default."""
        return []

    def tool_names(self) -> Collection[str]:
        """Return the names of the tools this middleware applies to; none by default.

        ``create_react_agent`` refuses a name that is none of its tools: a misspelled name
        would leave the real tool without the approval or the limit it was meant to get.
        """
        return frozenset()

    def hooks(self) -> frozenset[str]:
        """Return the names of the hooks this middleware's class defines."""
        return type(self)._defined

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def check_middleware(middleware: Any, where: str) -> tuple[Middleware, ...]:
    """Return ``middleware`` as a tuple, refusing anything that is not a ``Middleware``.

    Raises:
        GraphConfigError: naming the item and the fix.
    """
    if middleware is None:
        return ()
    if isinstance(middleware, Middleware) or not isinstance(middleware, Sequence | set):
        raise GraphConfigError(
            f"{where} takes middleware=[...], a list of Middleware instances, got "
            f"{middleware!r}; wrap it in a list."
        )
    for item in middleware:
        if not isinstance(item, Middleware):
            fix = "instantiate it: Name()" if isinstance(item, type) else "subclass Middleware"
            raise GraphConfigError(
                f"{where} got middleware item {item!r}, which is not a Middleware; {fix}."
            )
    return tuple(middleware)


# The graph's middleware while one of its nodes runs, so that the model and tool nodes
# (``nodestep.agents``) honour the graph's middleware without a parameter of their own.
active_middleware: ContextVar[tuple[Middleware, ...]] = ContextVar(
    "nodestep_middleware", default=()
)


def _with(middleware: Sequence[Middleware], hook: str) -> list[Middleware]:
    return [m for m in middleware if hook in m.hooks()]


def _raised(item: Middleware, hook: str, error: Exception) -> MiddlewareError:
    name = type(item).__name__
    return MiddlewareError(
        f"Middleware {name} raised in {hook}: {type(error).__name__}: {error}",
        middleware=name,
        hook=hook,
    )


def _checked(item: Middleware, hook: str, returned: Any, replaceable: bool) -> Replacement | None:
    """Return what a hook returned when it may return it.

    Raises:
        MiddlewareError: the hook returned what it may not.
    """
    if returned is None or (replaceable and isinstance(returned, Replacement)):
        return returned
    name = type(item).__name__
    takes = "None or ctx.replace(value)" if replaceable else "None (it only observes)"
    raise MiddlewareError(
        f"Middleware {name}'s {hook} returned {returned!r}; it returns {takes}.",
        middleware=name,
        hook=hook,
    )


async def _call(
    item: Middleware, hook: str, args: tuple[Any, ...], replaceable: bool
) -> Replacement | None:
    """Call one hook, awaiting it if it is async; check what it returned.

    Raises:
        MiddlewareError: the hook raised an ``Exception`` (the cause), or returned what it
            may not. A ``BaseException`` (a pause, a cancellation) goes through as it is.
    """
    try:
        returned = getattr(item, hook)(*args)
        if inspect.isawaitable(returned):
            returned = await returned
    except Exception as error:
        raise _raised(item, hook, error) from error
    return _checked(item, hook, returned, replaceable)


def _call_sync(
    item: Middleware, hook: str, args: tuple[Any, ...], replaceable: bool
) -> Replacement | None:
    """Call one ``def`` hook; as ``_call``, without an event loop."""
    try:
        returned = getattr(item, hook)(*args)
    except Exception as error:
        raise _raised(item, hook, error) from error
    if inspect.isawaitable(returned):
        close = getattr(returned, "close", None)
        if close is not None:
            close()  # never awaited: closed, so Python does not warn about it
        name = type(item).__name__
        raise MiddlewareError(
            f"Middleware {name}'s {hook} is a def that returned an awaitable; make it an "
            f"async def, or return None or ctx.replace(value).",
            middleware=name,
            hook=hook,
        )
    return _checked(item, hook, returned, replaceable)


def sync_hooks(middleware: Sequence[Middleware], hooks: frozenset[str]) -> bool:
    """Tell whether every hook of ``hooks`` that ``middleware`` define is a plain ``def``."""
    return not any(
        inspect.iscoroutinefunction(getattr(m, hook))
        for m in middleware
        for hook in hooks & m.hooks()
    )


def run_hooks_sync(
    middleware: Sequence[Middleware],
    hook: str,
    *args: Any,
    replaceable: bool = False,
    reverse: bool = False,
    apply: Callable[[Any], None] | None = None,
) -> Replacement | None:
    """Run ``hook`` as ``run_hooks`` does, for hooks that are all plain ``def``s.

    Why a second form: a plain ``def`` node whose middleware's node hooks are all plain
    ``def``s runs as a plain ``def`` node still, inline or in a worker thread as the engine
    picks, with no thread hop for the hooks (``sync_hooks`` tells when).
    """
    chosen = _with(middleware, hook)
    if reverse:
        chosen.reverse()
    last: Replacement | None = None
    for item in chosen:
        found = _call_sync(item, hook, args, replaceable)
        if found is not None:
            last = found
            if apply is not None:
                _apply(item, hook, apply, found.value)
    return last


async def run_hooks(
    middleware: Sequence[Middleware],
    hook: str,
    *args: Any,
    replaceable: bool = False,
    reverse: bool = False,
    apply: Callable[[Any], None] | None = None,
) -> Replacement | None:
    """Run ``hook`` of each middleware that has it, in order (or reversed), one at a time.

    Each hook sees what the ones before it replaced: ``apply`` is called with each
    replacement's value as it comes (it updates the context the next hook reads, and
    raises ``TypeError`` for a value of a kind the hook cannot replace with).

    Returns:
        The last ``Replacement`` a hook returned, or ``None``.

    Raises:
        MiddlewareError: a hook raised or returned what it may not.
    """
    chosen = _with(middleware, hook)
    if reverse:
        chosen.reverse()
    last: Replacement | None = None
    for item in chosen:
        found = await _call(item, hook, args, replaceable)
        if found is not None:
            last = found
            if apply is not None:
                _apply(item, hook, apply, found.value)
    return last


# The base class has no hook methods of its own: ``hooks()`` tells overridden from absent
# by ``getattr``, so a graph whose middleware lacks a hook never pays for calling it.


def _apply(item: Middleware, hook: str, apply: Callable[[Any], None], value: Any) -> None:
    try:
        apply(value)
    except TypeError as error:
        name = type(item).__name__
        raise MiddlewareError(
            f"Middleware {name}'s {hook} returned ctx.replace({value!r}); {error}.",
            middleware=name,
            hook=hook,
        ) from None
