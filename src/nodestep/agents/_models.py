"""Chat models: the protocol a model node calls, and the chunks a streamed reply comes in.

A chat model is any object with two async methods: ``complete`` returns the whole reply,
``stream`` yields it as ``MessageChunk``s, as the model produces them. ``assemble`` joins
chunks into the reply, so a node that streams stores the same message as one that does not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import orjson
from pydantic import BaseModel, ConfigDict

from nodestep._display.text import model_repr
from nodestep._errors import ModelError
from nodestep.agents._messages import AssistantMessage, TokenUsage, ToolCall

__all__ = ["ChatModel", "MessageChunk", "ToolCallChunk", "assemble", "http_failure"]


class ToolCallChunk(BaseModel):
    """A piece of a tool call in a streamed reply.

    Attributes:
        index: Which call of the reply the piece belongs to, from 0.
        id: The call's id, in the first piece of the call (or ``None``).
        name: The tool's name, in the first piece of the call (or ``None``).
        args: A piece of the arguments' JSON text; the pieces of a call join into it.
    """

    model_config = ConfigDict(frozen=True)

    def __repr__(self) -> str:
        return model_repr(self)

    index: int = 0
    id: str | None = None
    name: str | None = None
    args: str = ""


class MessageChunk(BaseModel):
    """A piece of a streamed reply: the data of a ``"messages"`` stream event.

    Attributes:
        message_id: The id of the reply it is part of; the stored message has this id.
        content: The next piece of text (a token or a few).
        tool_call_chunks: Pieces of tool calls.
        usage: The tokens of the whole call, in the chunk that ends the reply (when the
            model reports them).
        finish_reason: Why the model stopped, in the chunk that says it.
    """

    model_config = ConfigDict(frozen=True)

    def __repr__(self) -> str:
        return model_repr(self)

    message_id: str = ""
    content: str = ""
    tool_call_chunks: tuple[ToolCallChunk, ...] = ()
    usage: TokenUsage | None = None
    finish_reason: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """What a model node calls: any object with these two methods (and a ``name``).

    ``tools`` are the JSON specs of the tools the model may call, each a dict with
    ``name``, ``description`` and ``parameters`` (a JSON schema).
    """

    name: str

    async def complete(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]]
    ) -> AssistantMessage:
        """Return the model's whole reply to ``messages``."""
        ...

    def stream(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[MessageChunk]:
        """Yield the model's reply to ``messages`` in pieces, as it is produced."""
        ...


def assemble(chunks: Iterable[MessageChunk], message_id: str, model: str = "") -> AssistantMessage:
    """Join the chunks of a streamed reply into the reply.

    The reply's ``usage`` and ``finish_reason`` are the last ones a chunk carries.

    Args:
        chunks: The chunks, in the order they came.
        message_id: The reply's id.
        model: The model's name, for errors.

    Raises:
        ModelError: a tool call's joined arguments are not a JSON object, or it has no name.
    """
    text: list[str] = []
    calls: dict[int, list[Any]] = {}  # index -> [id, name, [args pieces]]
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    for chunk in chunks:
        if chunk.content:
            text.append(chunk.content)
        usage = chunk.usage or usage
        finish_reason = chunk.finish_reason or finish_reason
        for piece in chunk.tool_call_chunks:
            call = calls.setdefault(piece.index, [None, None, []])
            call[0] = call[0] or piece.id
            call[1] = call[1] or piece.name
            call[2].append(piece.args)
    tool_calls = tuple(
        _tool_call(calls[index], index, message_id, model) for index in sorted(calls)
    )
    return AssistantMessage(
        content="".join(text),
        tool_calls=tool_calls,
        id=message_id,
        usage=usage,
        finish_reason=finish_reason,
    )


def _tool_call(parts: list[Any], index: int, message_id: str, model: str) -> ToolCall:
    call_id, name, pieces = parts
    text = "".join(pieces) or "{}"
    try:
        args = orjson.loads(text)
    except orjson.JSONDecodeError:
        args = None
    if not isinstance(args, dict) or not name:
        raise ModelError(
            f"Model {model!r} streamed tool call {index} of message {message_id!r} with "
            f"name {name!r} and arguments {text!r}: a tool call needs a name and a JSON "
            f"object of arguments. Check that the server speaks the streaming format of "
            f"the model's API.",
            model=model,
        )
    return ToolCall(name=name, args=args, id=call_id or f"{message_id}-call-{index}")


def http_failure(model: str, base_url: object, error: Exception, status: int | None) -> ModelError:
    """Return the ``ModelError`` of a failed request to a model's HTTP API.

    ``retryable`` is set for what another attempt may pass: no status (the connection
    failed or timed out), 408, 429 and every 5xx; the message says how to retry it, or
    what to check when retrying cannot help.
    """
    retryable = status is None or status in (408, 429) or status >= 500
    code = f" (HTTP {status})" if status else ""
    fix = (
        "It may pass on: retry it with @node(retry=RetryPolicy(retry_on="
        "retryable_model_error)), e.g. model_node(..., retry=...)."
        if retryable
        else "Check the base URL, the model name, the key and the request."
    )
    return ModelError(
        f"Model {model!r} at {base_url} failed{code}: {error}. {fix}",
        model=model,
        status=status,
        retryable=retryable,
    )
