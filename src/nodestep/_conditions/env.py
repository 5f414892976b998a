"""What a condition reads when it is evaluated: the state, context, output and error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from nodestep._errors import ContextNotProvidedError

__all__ = ["NO_CONTEXT", "Env", "EvaluationProblem", "read_context", "read_field"]

NO_CONTEXT: Any = object()
"""The context of a run that was given none."""


class Env:
    """The values one evaluation of a condition reads.

    Attributes:
        state: The state (a model instance) after the superstep, or before it when the
            node failed.
        context: The run's ``context=``, or ``NO_CONTEXT``.
        output: The node's update, field by field, or ``None`` (it failed, or no
            condition reads it).
        error: The node's exception when it failed, else ``None``.
    """

    __slots__ = ("context", "error", "output", "state")

    def __init__(
        self,
        state: Any,
        context: Any = NO_CONTEXT,
        output: dict[str, Any] | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.state = state
        self.context = context
        self.output = output
        self.error = error


class EvaluationProblem(Exception):
    """A condition that cannot be evaluated on these values (e.g. ``'a' < 1`` through an
    untyped context); the caller turns it into a ``GraphExecutionError`` that names the
    condition.

    Attributes:
        fix: What to do, when the caller's usual advice (declare the value's type) does
            not fit: the type was declared, and the value does not match it.
    """

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


def read_context(env: Env, dotted: str) -> Any:
    """Return the run's context, refusing a run that was given none."""
    context = env.context
    if context is NO_CONTEXT:
        raise ContextNotProvidedError(
            f"A condition reads '{dotted}' from the run's context, but the run got no "
            f"context. Pass context=... to invoke/stream (and again when resuming: the "
            f"context is never stored)."
        )
    return context


def read_field(value: Any, name: str) -> Any:
    """Return ``value.name`` for a dict or a model, ``None`` through ``None``.

    Only dict keys and declared model fields are read: a condition never reaches an
    arbitrary attribute (a method, ``__class__``) of a Python object.
    """
    if isinstance(value, dict):
        return value.get(name)
    if value is None:
        return None
    if isinstance(value, BaseModel):
        if name in _fields(type(value)):
            return getattr(value, name)
        return None
    raise EvaluationProblem(
        f"cannot read '{name}' of a {type(value).__name__}: conditions read fields of dicts "
        f"and pydantic models only"
    )


_FIELDS: dict[type[BaseModel], frozenset[str]] = {}


def _fields(cls: type[BaseModel]) -> frozenset[str]:
    """Return a model class's field names, kept per class (``model_fields`` is slow to ask)."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = frozenset(cls.model_fields)
    return found
