"""Structured output: the agent's final answer validated into a pydantic model.

The model is told, in the system prompt (sent on every call, never stored), to give its
final answer as one JSON object of the model's schema. The ``structure`` node reads the
answer (an assistant message without tool calls), validates it and writes it to the
state's ``structured_response``. An answer that does not fit goes back to the model as a
user message naming what is wrong (stored, so the history shows why the model answered
again), and the model answers again; after ``attempts`` answers that do not fit, the run
fails with a ``ModelError``.

The attempts are counted from the conversation (the correction messages since the last
message the user wrote), not in a counter of the node, so a resumed, forked or replayed
thread counts the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from nodestep._errors import GraphConfigError, ModelError
from nodestep._flow.nodes import Node, NodeContext, node
from nodestep.agents._conversation import MessagesState, next_message_id
from nodestep.agents._messages import AssistantMessage, UserMessage
from nodestep.agents._model_node import check_conversation, conversation_of

__all__ = [
    "FIELD",
    "asks_again",
    "check_response_format",
    "structured_node",
    "with_instruction",
    "with_response_field",
]

FIELD = "structured_response"
"""The state field the validated answer goes to."""

_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```$", re.DOTALL)


def check_response_format(response_format: object, attempts: object) -> type[BaseModel]:
    """Return ``response_format`` once it is known to be a pydantic model class.

    Raises:
        GraphConfigError: it is not a ``BaseModel`` subclass (an instance, a dict schema,
            a dataclass), or ``attempts`` is not a positive int.
    """
    if not isinstance(response_format, type) or not issubclass(response_format, BaseModel):
        raise GraphConfigError(
            f"response_format={response_format!r} is not a pydantic model class: the answer "
            f"is validated into it. Pass a class derived from pydantic.BaseModel, e.g. "
            f"class Answer(BaseModel): city: str."
        )
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise GraphConfigError(
            f"response_attempts={attempts!r} is not a number of answers: pass an int of at "
            f"least 1 (1 fails on the first answer that does not fit)."
        )
    return response_format


def with_response_field(state: type[MessagesState], response: type[BaseModel]) -> type[Any]:
    """Return ``state`` if it declares ``structured_response``, else a subclass of it that
    does, as ``response | None`` (``None`` until the first answer)."""
    if FIELD in state.model_fields:
        return state  # the user's own declaration: its type is checked on each write
    field: Any = (response | None, None)
    return create_model(state.__name__, __base__=state, **{FIELD: field})


def with_instruction(system: str | None, response: type[BaseModel] | None) -> str | None:
    """Return the system prompt with what it tells the model about its final answer."""
    if response is None:
        return system
    schema = json.dumps(response.model_json_schema(), sort_keys=True)
    instruction = (
        "When you give your final answer, reply with only one JSON object, without other "
        f"text, that fits this JSON schema: {schema}"
    )
    return f"{system}\n\n{instruction}" if system else instruction


def _parsed(text: str, response: type[BaseModel]) -> BaseModel:
    """Validate an answer's text; a JSON object in a code fence is read from the fence."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    return response.model_validate_json(text)


def _problems(error: ValidationError) -> str:
    parts = []
    for detail in error.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in detail.get("loc", ())) or "the answer"
        parts.append(f"{where}: {detail.get('msg', 'invalid')}")
    return "; ".join(parts)


_SENDER = "structured_output"
"""The ``name`` of the user messages the structure node writes, which marks them."""


def _corrections(messages: list[Any]) -> int:
    """Count this turn's correction messages: back to the last message a user wrote."""
    count = 0
    for message in reversed(messages):
        if message.role == "user":
            if message.name != _SENDER:
                break
            count += 1
    return count


def asks_again(state: Any) -> bool:
    """Tell whether the structure node sent the answer back (the last message is its)."""
    last = state.messages[-1] if state.messages else None
    return isinstance(last, UserMessage) and last.name == _SENDER


def structured_node(response: type[BaseModel], attempts: int, name: str = "structure") -> Node:
    """Make the node that validates the final answer into ``response`` (see the module).

    Raises:
        ModelError: at run time, the ``attempts``-th answer that does not fit.
    """

    async def structure(state: Any, ctx: NodeContext) -> dict[str, Any]:
        messages = conversation_of(state, ctx.node)
        last = messages[-1] if messages else None
        text = last.content if isinstance(last, AssistantMessage) else ""
        try:
            return {FIELD: _parsed(text, response)}
        except ValidationError as error:
            problems = _problems(error)
        tried = _corrections(messages) + 1
        if tried >= attempts:
            model = (last.model or "") if isinstance(last, AssistantMessage) else ""
            raise ModelError(
                f"The model's answer does not fit {response.__name__} after {tried} "
                f"{'try' if tried == 1 else 'tries'}: {problems}. The last answer was "
                f"{text[:200]!r}. Raise response_attempts=, make the response model simpler, or "
                f"use a model that writes JSON reliably.",
                model=model,
            )
        correction = UserMessage(
            content=(
                f"Your answer does not fit the {response.__name__} schema: {problems}. "
                f"Reply with only one JSON object that fits the schema."
            ),
            name=_SENDER,
            id=next_message_id(messages, ctx.node),
        )
        return {"messages": [correction]}

    structure.__doc__ = f"Validate the final answer into {response.__name__}."
    return check_conversation(node(structure, name=name))
