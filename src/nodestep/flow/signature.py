"""Which parameter of a node's function gets the state, and which the ``NodeContext``.

``flow.nodes`` asks this once per node, when the node is made, so a function nodestep cannot
call is refused there and not in the middle of a run.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, NoReturn

from nodestep.errors import GraphConfigError

__all__ = ["context_position", "refuse_parameter"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def context_position(
    fn: Callable[..., Any], name: str, is_context: Callable[[Any], bool]
) -> tuple[bool, bool, str | None]:
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
    ctx = [p for p in params if is_context(annotations[p.name])]
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
            refuse_parameter(name, p, annotations[p.name])
    if context is None:
        return False, False, None
    if context.kind is inspect.Parameter.KEYWORD_ONLY:
        return True, False, context.name
    return True, positional.index(context) == 0, None


def refuse_parameter(name: str, p: inspect.Parameter, annotation: Any) -> NoReturn:
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
