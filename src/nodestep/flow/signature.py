"""Read a node function's parameters: where the state, the context and a task input go.

A node takes the state first. A parameter annotated ``NodeContext`` gets the run's
context; a parameter annotated with a pydantic model gets the task's input (the payload
of the ``Send`` that started the task, validated against that model). Every other
parameter needs a default. The checks run when the node is made, not in the middle of a
run.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import BaseModel

from nodestep.errors import GraphConfigError

__all__ = ["Parameters", "read_parameters"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True, slots=True)
class Parameters:
    """How a node function is called.

    Attributes:
        wants_ctx: Whether it takes a ``NodeContext``.
        ctx_first: Whether the ``NodeContext`` is the first positional parameter.
        ctx_keyword: The name of a keyword-only ``NodeContext`` parameter, or ``None``.
        input_param: The name of the parameter that gets the task input, or ``None``.
        input_model: The pydantic model of the task input, or ``None``.
    """

    wants_ctx: bool
    ctx_first: bool
    ctx_keyword: str | None
    input_param: str | None = None
    input_model: type[BaseModel] | None = None


def _is_context_annotation(annotation: Any, context: type) -> bool:
    """Tell whether a parameter's annotation asks for the context.

    ``NodeContext | None`` counts too (a default of ``None`` lets tests call the function
    directly). A string annotation that could not be resolved is matched by name.
    """
    if annotation is context:
        return True
    if isinstance(annotation, str):
        parts = [p.strip() for p in annotation.split("|")]
        names = [p.split(".")[-1] for p in parts if p != "None"]
        return names == [context.__name__]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        return [a for a in args if a is not type(None)] == [context]
    return False


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def read_parameters(fn: Callable[..., Any], name: str, context: type) -> Parameters:
    """Return how node ``name`` calls ``fn``; ``context`` is the ``NodeContext`` class.

    Raises:
        GraphConfigError: a parameter nodestep cannot fill, no parameter for the state,
            two context or two input parameters, or a positional-only input parameter.
    """
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        # An annotation that cannot be resolved (a local class under ``from __future__
        # import annotations``) leaves the string, which is matched by its last dotted part.
        hints = {}
    annotations = {p.name: hints.get(p.name, p.annotation) for p in params}
    ctx = [p for p in params if _is_context_annotation(annotations[p.name], context)]
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
    context_param = ctx[0] if ctx else None
    if (
        context_param is not None
        and context_param.kind in _POSITIONAL
        and positional.index(context_param) > 1
    ):
        raise GraphConfigError(
            f"Node '{name}' takes its NodeContext parameter '{context_param.name}' as "
            f"positional parameter {positional.index(context_param) + 1}, where the context "
            f"would land in another parameter; put it right before or after the state, or "
            f"make it keyword-only: def {name}(state, *, {context_param.name}: NodeContext)."
        )
    taken = (state[0], context_param)
    given = _input_parameter(name, [p for p in params if p not in taken], annotations)
    for p in params:
        if p in taken or p is given or p.default is not inspect.Parameter.empty:
            continue
        if p.kind in _POSITIONAL or p.kind is inspect.Parameter.KEYWORD_ONLY:
            _refuse_parameter(name, p, annotations[p.name])
    model = None if given is None else annotations[given.name]
    input_name = None if given is None else given.name
    if context_param is None:
        return Parameters(False, False, None, input_name, model)
    if context_param.kind is inspect.Parameter.KEYWORD_ONLY:
        return Parameters(True, False, context_param.name, input_name, model)
    first = positional.index(context_param) == 0
    return Parameters(True, first, None, input_name, model)


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
