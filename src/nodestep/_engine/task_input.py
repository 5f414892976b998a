"""Task inputs: a ``Send`` payload validated against the input model its node declares.

A node that takes a parameter annotated with a pydantic model (``def count(state, part:
Part)``) gets the payload of the ``Send`` that started its task as that model, not laid
over the state: per-task fields such as ``index`` or ``chunk`` need not be state fields.
The payload is checked when it is sent, so a bad one fails the sending task, and kept as
data (its JSON form with a store); the task validates it again when it runs, so a live
run and a run continued from the store hand the node the same input.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, ValidationError

from nodestep._errors import GraphExecutionError, StateStoreError, StateUpdateError
from nodestep._flow.nodes import Node
from nodestep._state.field_spec import REDUCER_CONTEXT
from nodestep._state.model_form import model_json_form, stored_dump, validate_stored, validator
from nodestep._superstep.position import PlannedTask, SendRoute

__all__ = ["task_input", "task_input_route"]


def _first_problem(error: ValidationError) -> tuple[str, str]:
    """Return the field and the message of a validation error's first problem."""
    detail = error.errors(include_url=False)[0]
    where = ".".join(str(p) for p in detail.get("loc", ())) or "(the whole input)"
    message = str(detail.get("msg", "invalid value"))
    if detail.get("type") != "missing":
        message = f"{message} (got {detail.get('input')!r})"
    return where, message


def task_input_route(
    writer: str, node: Node, payload: dict[str, Any], *, stores_json: bool
) -> SendRoute:
    """Return the route of ``Send(node, payload)`` from ``writer``, its input validated.

    Raises:
        StateUpdateError: a key that is not a field of the node's input model, a field
            whose value does not fit it, or (with a store) a value without a JSON form
            or whose JSON form reads back different.
    """
    model = node.input_model
    assert model is not None  # the router calls this only for nodes with a model
    if model.model_config.get("extra") != "allow":
        keys = _input_keys(model)
        for key in payload:
            if key not in keys:
                shown = _shown(model)
                raise StateUpdateError(
                    f"Node '{writer}' sent '{node.name}' the key '{key}', which is not a field "
                    f"of its input model {model.__name__} (fields: {shown}); the whole payload "
                    f"is the task's input. Add '{key}' to {model.__name__}, or leave it out "
                    f"of the payload.",
                    field=key,
                    writer=writer,
                )
    try:
        # The input is kept as it is: a value that only a reducer may take is refused.
        value = validator(model)(payload, context={REDUCER_CONTEXT: None})
    except ValidationError as error:
        field, message = _first_problem(error)
        shown = _shown(model)
        raise StateUpdateError(
            f"Node '{writer}' sent '{node.name}' a payload that does not fit its input model "
            f"{model.__name__}: field '{field}': {message}. Send values that fit "
            f"{model.__name__} ({shown}), or change the model.",
            field=field,
            writer=writer,
        ) from None
    if not stores_json:
        # The form the task validates its input from: without computed fields, which
        # validation may refuse (extra="forbid").
        return SendRoute(node.name, {}, None, stored_dump(value, "python"))
    try:
        # Checked to read back as it is: the task, a continuation and a new process all
        # validate the input from this form.
        data = model_json_form(
            value, f"The input {model.__name__} that '{writer}' sent '{node.name}'"
        )
    except StateStoreError as error:
        raise StateUpdateError(
            f"{error} A run with a state store stores every task input.", writer=writer
        ) from None
    return SendRoute(node.name, {}, None, data)


def _shown(model: type[BaseModel]) -> str:
    """Return the fields of ``model`` as an error shows them: each field's alias, or its name."""
    return ", ".join(i.alias or n for n, i in model.model_fields.items()) or "none"


@functools.lru_cache(maxsize=256)
def _input_keys(model: type[BaseModel]) -> frozenset[str]:
    """Return the keys a payload may use: each field's alias, or its name.

    A field with an alias is validated by the alias, and by its name only when the model
    says so (``validate_by_name``), so the check takes the keys validation takes.

    Kept per model: they depend on the model alone, and a ``Send`` to a node with an input
    model (each tool call of an agent) asked for them again (with the names an error
    shows, now made only for the error: a set and a join less a turn of W10's agent).
    """
    config = model.model_config
    by_name = bool(config.get("validate_by_name") or config.get("populate_by_name"))
    by_alias = config.get("validate_by_alias", True) is not False
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        aliases = {a for a in (info.alias, info.validation_alias) if isinstance(a, str)}
        if by_alias:
            keys |= aliases
        if by_name or not aliases:
            keys.add(name)
    return frozenset(keys)


def task_input(node: Node, task: PlannedTask) -> BaseModel:
    """Return the input of ``task`` of ``node``, which declares an input model.

    Raises:
        GraphExecutionError: the task was not started by ``Send`` and the model has
            required fields, or the stored input no longer fits the model.
    """
    model = node.input_model
    assert model is not None  # the task runner calls this only for nodes with a model
    try:
        return validate_stored(model, task.input or {})
    except ValidationError as error:
        field, message = _first_problem(error)
        if task.input is None:
            raise GraphExecutionError(
                f"Node '{node.name}' takes a task input {model.__name__}, but its task "
                f"'{task.task_id}' was started by an edge, not by Send, so it has none, and "
                f"field '{field}' of {model.__name__}: {message}. Start '{node.name}' with "
                f"Send({node.name}, {{...}}), or give {model.__name__}'s fields defaults."
            ) from None
        raise GraphExecutionError(
            f"The stored input of task '{task.task_id}' no longer fits {model.__name__}, "
            f"the input model of node '{node.name}': field '{field}': {message}. Restore "
            f"the model the thread was run with to continue it, or fork the thread at an "
            f"earlier event."
        ) from None
