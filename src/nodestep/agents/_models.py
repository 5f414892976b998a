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
from nodestep._engine.redact import mask
from nodestep._errors import ModelError
from nodestep.agents._messages import AssistantMessage, TokenUsage, ToolCall

__all__ = [
    "ChatModel",
    "MessageChunk",
    "ToolCallChunk",
    "assemble",
    "body_failure",
    "http_failure",
    "key_texts",
    "quotes_secret",
    "whole_text",
]


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

    The reply's ``usage`` and ``finish_reason`` are the last ones a chunk carries. The
    text is joined before it is read as characters: a character sent as a UTF-16 pair
    split over two chunks (``"\\ud83d"``, then ``"\\ude00"``) becomes one (see
    ``whole_text``).

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
        content=whole_text("".join(text)),
        tool_calls=tool_calls,
        id=message_id,
        usage=usage,
        finish_reason=finish_reason,
    )


def _tool_call(parts: list[Any], index: int, message_id: str, model: str) -> ToolCall:
    call_id, name, pieces = parts
    text = whole_text("".join(pieces)) or "{}"
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


def whole_text(text: str) -> str:
    """Return ``text`` with UTF-16 surrogate pairs joined, and a lone surrogate as U+FFFD.

    Why: a server that writes ASCII-only JSON sends an emoji as ``"\\ud83d\\ude00"``,
    and a chunk boundary may fall between the two halves, which each chunk's JSON then
    decodes apart. Joined, they are one character again; a half whose other half never
    came (a cut reply) cannot be stored as UTF-8, and becomes U+FFFD, the replacement
    character, rather than failing the run.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def key_texts(*keys: object) -> tuple[str, ...]:
    """Return the API keys a model's errors must not show: the given strings but ``"none"``.

    ``"none"`` is what a model sends to a local server that asks for no key: no secret,
    and masking it would mask the word in every message.
    """
    return tuple(k for k in keys if isinstance(k, str) and k and k != "none")


def quotes_secret(error: BaseException, secrets: Sequence[str]) -> bool:
    """Tell whether ``error``'s message shows one of ``secrets``, in any form ``mask`` knows.

    A client then raises its ``ModelError`` ``from None``: a logged traceback would
    show the SDK's error, key and all, as the cause.
    """
    text = str(error)
    return bool(secrets) and mask(text, secrets) != text


def body_failure(
    model: str, base_url: object, body: str | None, error: Exception | None, secrets: Sequence[str]
) -> ModelError:
    """Return the ``ModelError`` of an answer of HTTP 200 whose body is not the API's JSON.

    ``body`` is the body when it is not JSON at all (an HTML page: ``base_url`` points at
    a web server or a proxy), which the next attempt gets again: not retryable. ``error``
    is the parse error of JSON that ends early or is malformed (a cut connection), which
    may pass on: retryable.
    """
    if body is not None:
        shown = mask(body[:80], secrets) + ("..." if len(body) > 80 else "")
        return ModelError(
            f"Model {model!r} at {base_url} answered HTTP 200 with a body that is not JSON "
            f"({shown!r}): base_url may point at another server, such as a web page or a "
            f"proxy's. Check that it is the API's root, e.g. 'http://127.0.0.1:8000/v1' "
            f"for an OpenAI-compatible server.",
            model=model,
            status=200,
            retryable=False,
        )
    return ModelError(
        f"Model {model!r} at {base_url} answered HTTP 200 with JSON that does not parse "
        f"({mask(str(error), secrets)}): the connection may have been cut. It may pass "
        f"on: retry it with @node(retry=RetryPolicy(retry_on=retryable_model_error)), "
        f"e.g. model_node(..., retry=...).",
        model=model,
        status=200,
        retryable=True,
    )


def http_failure(
    model: str,
    base_url: object,
    error: Exception,
    status: int | None,
    secrets: Sequence[str] = (),
) -> ModelError:
    """Return the ``ModelError`` of a failed request to a model's HTTP API.

    ``retryable`` is set for what another attempt may pass: no status (the connection
    failed or timed out), 408, 429 and every 5xx; the message says how to retry it, or
    what to check when retrying cannot help. Every form of each of ``secrets`` (the
    API key) in the error's text is masked: a gateway's error body may quote the header
    it got.
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
        f"Model {model!r} at {base_url} failed{code}: {mask(str(error), secrets)}. {fix}",
        model=model,
        status=status,
        retryable=retryable,
    )
