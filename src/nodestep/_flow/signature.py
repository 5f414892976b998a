"""What a node's parameters ask for: the state, the context, a task input, private state.

A node takes the state first. A parameter annotated ``NodeContext`` gets the run's
context; one annotated with the node's ``private_state`` model gets its private state;
another annotated with a pydantic model gets the task's input (the payload of the
``Send`` that started the task, validated against that model). Every other parameter
needs a default. Checked once, when the node is made, so a parameter nodestep cannot fill
fails there and not in the middle of a run.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import BaseModel

from nodestep._errors import GraphConfigError
from nodestep._flow.context import NodeContext

__all__ = ["Parameters", "parameters"]


@dataclass(frozen=True, slots=True)
class Parameters:
    """How a node is called.

    Attributes:
        wants_ctx: Whether the function takes a ``NodeContext``.
        ctx_first: Whether the ``NodeContext`` is the first positional parameter.
        ctx_keyword: The name of a keyword-only ``NodeContext`` parameter, or ``None``.
        private_keyword: The parameter that gets the node's private state, or ``None``.
        input_param: The name of the parameter that gets the task input, or ``None``.
        input_model: The pydantic model of the task input, or ``None``.
    """

    wants_ctx: bool
    ctx_first: bool
    ctx_keyword: str | None
    private_keyword: str | None
    input_param: str | None = None
    input_model: type[BaseModel] | None = None


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


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def parameters(fn: Callable[..., Any], name: str, private_state: type | None) -> Parameters:
    """Return how to call ``fn``: where its context and private state go.

    Raises:
        GraphConfigError: a parameter nodestep cannot fill, no parameter for the state, or
            a ``private_state`` model no parameter is annotated with.
    """
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        # An annotation that cannot be resolved (a local class under ``from __future__
        # import annotations``) leaves the string, which is matched by its last dotted part.
        hints = {}
    annotations = {p.name: hints.get(p.name, p.annotation) for p in params}
    private = _private_parameter(params, annotations, name, private_state)
    ctx = [p for p in params if _is_context_annotation(annotations[p.name])]
    positional = [p for p in params if p.kind in _POSITIONAL and p is not private]
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
    _check_private_place(fn, name, private, state[0], context)
    taken = (state[0], context, private)
    given = _input_parameter(name, [p for p in params if p not in taken], annotations)
    for p in params:
        if p in taken or p is given or p.default is not inspect.Parameter.empty:
            continue
        if p.kind in _POSITIONAL or p.kind is inspect.Parameter.KEYWORD_ONLY:
            _refuse_parameter(name, p, annotations[p.name])
    private_keyword = None if private is None else private.name
    model = None if given is None else annotations[given.name]
    inputs = (None, None) if given is None else (given.name, model)
    if context is None:
        return Parameters(False, False, None, private_keyword, *inputs)
    if context.kind is inspect.Parameter.KEYWORD_ONLY:
        return Parameters(True, False, context.name, private_keyword, *inputs)
    return Parameters(True, positional.index(context) == 0, None, private_keyword, *inputs)


def _private_parameter(
    params: list[inspect.Parameter],
    annotations: dict[str, Any],
    name: str,
    model: type | None,
) -> inspect.Parameter | None:
    """Return the parameter annotated with the node's private state model, if it has one.

    Raises:
        GraphConfigError: ``model`` is given but no parameter (or several) is annotated
            with it.
    """
    if model is None:
        return None
    found = [p for p in params if _is_model_annotation(annotations[p.name], model)]
    label = model.__name__
    if len(found) != 1:
        what = "no parameter is" if not found else f"{len(found)} parameters are"
        raise GraphConfigError(
            f"Node '{name}' declares private_state={label}, but {what} annotated {label}; "
            f"the node gets its private state by one such parameter: "
            f"def {name}(state, *, memory: {label})."
        )
    return found[0]


def _check_private_place(
    fn: Callable[..., Any],
    name: str,
    private: inspect.Parameter | None,
    state: inspect.Parameter,
    context: inspect.Parameter | None,
) -> None:
    """Refuse a private state parameter where the state or the context would land in it.

    The private state is passed by keyword, so it must come after the positional
    parameters the state and the context fill.
    """
    if private is None:
        return
    order = list(inspect.signature(fn).parameters.values())
    filled = [p for p in (state, context) if p is not None and p.kind in _POSITIONAL]
    if private.kind is inspect.Parameter.POSITIONAL_ONLY or (
        private.kind in _POSITIONAL and any(order.index(private) < order.index(p) for p in filled)
    ):
        raise GraphConfigError(
            f"Node '{name}' takes its private state parameter '{private.name}' before the "
            f"state or the context, or positional-only; it is passed by keyword, so put it "
            f"after them: def {name}(state, *, {private.name}: ...)."
        )


def _is_model_annotation(annotation: Any, model: type) -> bool:
    """Tell whether a parameter's annotation is ``model`` (or ``model | None``), as for the
    context: a default of ``None`` lets tests call the function directly."""
    if annotation is model:
        return True
    if isinstance(annotation, str):
        parts = [p.strip() for p in annotation.split("|")]
        return [p.split(".")[-1] for p in parts if p != "None"] == [model.__name__]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        return [a for a in args if a is not type(None)] == [model]
    return False


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _input_parameter(
    name: str, params: list[inspect.Parameter], annotations: dict[str, Any]
) -> inspect.Parameter | None:
    """Return the parameter annotated with a pydantic model, the task input, if any."""
    found = [
        p
        for p in params
        if _is_model(annotations[p.name])
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if len(found) > 1:
        shown = ", ".join(f"'{p.name}'" for p in found)
        raise GraphConfigError(
            f"Node '{name}' has {len(found)} parameters annotated with a model ({shown}); a "
            f"task gets one input, so keep one of them and put its fields in one model."
        )
    if found and found[0].kind is inspect.Parameter.POSITIONAL_ONLY:
        p = found[0]
        raise GraphConfigError(
            f"Node '{name}' takes its input '{p.name}' as a positional-only parameter; the "
            f"input is passed by name, so drop the '/' after it or make it keyword-only."
        )
    return found[0] if found else None


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
    if isinstance(annotation, str):
        # Unresolved: a class local to a function, under ``from __future__ import annotations``.
        how += (
            " (text that could not be resolved to a class: to use a model as the task "
            "input, define it at the top level of the module)"
        )
    raise GraphConfigError(
        f"Node '{name}' has the required {kind} '{p.name}', which {how}; a node gets only the "
        f"state, by its NodeContext annotation the context, and by an annotation with a "
        f"pydantic model its task input. Annotate it as the context (def {name}(state, "
        f"{fix})), give it a default, or remove it."
    )
