"""The shapes of the model servers' answers that nodestep reads, checked before it reads.

Why: the ``openai`` and ``anthropic`` clients build their answer objects from the JSON
without validating it, so a server that is not quite the API (a proxy, a local server, a
gateway's error page sent as HTTP 200) hands over a list, a ``null``, a list where text
belongs or a number where a name belongs, and reading it would fail with a raw
``AttributeError`` or ``TypeError`` deep in the model node. Each shape declares only the
fields nodestep reads, each as loosely as the APIs allow (a missing ``finish_reason``, an
unknown content block, extra fields), so any server that speaks the API passes, and
anything else is one ``ModelError`` that says where the answer went wrong and what it held.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    NonNegativeInt,
    Tag,
    TypeAdapter,
    ValidationError,
)

from nodestep._engine.redact import mask
from nodestep._errors import ModelError

__all__ = [
    "ANTHROPIC_EVENT",
    "ANTHROPIC_MESSAGE",
    "OPENAI_CHUNK",
    "OPENAI_COMPLETION",
    "checked_answer",
]

_Shape = TypeVar("_Shape")


class _Read(BaseModel):
    # Fields nodestep does not read are left alone: servers add their own.
    model_config = ConfigDict(extra="ignore", from_attributes=True)


class _OpenAIFunction(_Read):
    name: str
    arguments: str | None = None


class _OpenAICall(_Read):
    id: str | None = None
    function: _OpenAIFunction


class _OpenAIMessage(_Read):
    content: str | None = None
    tool_calls: list[_OpenAICall] | None = None


class _OpenAIChoice(_Read):
    message: _OpenAIMessage
    finish_reason: str | None = None


class _OpenAIUsage(_Read):
    prompt_tokens: NonNegativeInt | None = None
    completion_tokens: NonNegativeInt | None = None
    total_tokens: NonNegativeInt | None = None


class _OpenAICompletion(_Read):
    """A chat completion, as ``OpenAIChatModel`` reads it."""

    choices: list[_OpenAIChoice] | None = None  # none: "replied with no choices"
    usage: _OpenAIUsage | None = None


class _OpenAIDeltaFunction(_Read):
    name: str | None = None
    arguments: str | None = None


class _OpenAIDeltaCall(_Read):
    index: int
    id: str | None = None
    function: _OpenAIDeltaFunction | None = None


class _OpenAIDelta(_Read):
    content: str | None = None
    tool_calls: list[_OpenAIDeltaCall] | None = None


class _OpenAIDeltaChoice(_Read):
    index: int = 0
    delta: _OpenAIDelta
    finish_reason: str | None = None


class _OpenAIChunk(_Read):
    """One event of a streamed chat completion, as ``OpenAIChatModel`` reads it."""

    choices: list[_OpenAIDeltaChoice] | None = None  # the usage chunk has none
    usage: _OpenAIUsage | None = None


class _AnthropicText(_Read):
    type: Literal["text"]
    text: str


class _AnthropicToolUse(_Read):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any = None


class _AnthropicOther(_Read):
    type: str  # thinking, a server tool's block...: left out of the reply


_TAG = " block"
"""The end of a union's tag, which pydantic puts in an error's place and a message leaves out."""


def _kind(value: Any, known: tuple[str, ...]) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return (kind if kind in known else "other") + _TAG


def _block_kind(block: Any) -> str:
    return _kind(block, ("text", "tool_use"))


class _AnthropicUsage(_Read):
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    cache_creation_input_tokens: NonNegativeInt | None = None
    cache_read_input_tokens: NonNegativeInt | None = None


_AnthropicBlock = Annotated[
    Annotated[_AnthropicText, Tag("text" + _TAG)]
    | Annotated[_AnthropicToolUse, Tag("tool_use" + _TAG)]
    | Annotated[_AnthropicOther, Tag("other" + _TAG)],
    Discriminator(_block_kind),
]


class _AnthropicMessage(_Read):
    """A Messages API reply, as ``AnthropicChatModel`` reads it."""

    content: list[_AnthropicBlock]
    usage: _AnthropicUsage | None = None
    stop_reason: str | None = None


class _AnthropicStarted(_Read):
    usage: _AnthropicUsage | None = None


class _AnthropicMessageStart(_Read):
    type: Literal["message_start"]
    message: _AnthropicStarted


class _AnthropicBlockStart(_Read):
    type: Literal["content_block_start"]
    index: int
    content_block: _AnthropicBlock


class _AnthropicTextDelta(_Read):
    type: Literal["text_delta"]
    text: str


class _AnthropicJsonDelta(_Read):
    type: Literal["input_json_delta"]
    partial_json: str


def _delta_kind(delta: Any) -> str:
    return _kind(delta, ("text_delta", "input_json_delta"))


class _AnthropicBlockDelta(_Read):
    type: Literal["content_block_delta"]
    index: int
    delta: Annotated[
        Annotated[_AnthropicTextDelta, Tag("text_delta" + _TAG)]
        | Annotated[_AnthropicJsonDelta, Tag("input_json_delta" + _TAG)]
        | Annotated[_AnthropicOther, Tag("other" + _TAG)],  # thinking, signatures...
        Discriminator(_delta_kind),
    ]


class _AnthropicStop(_Read):
    stop_reason: str | None = None


class _AnthropicMessageDelta(_Read):
    type: Literal["message_delta"]
    delta: _AnthropicStop
    usage: _AnthropicUsage | None = None


def _event_kind(event: Any) -> str:
    return _kind(
        event, ("message_start", "content_block_start", "content_block_delta", "message_delta")
    )


_AnthropicEvent = Annotated[
    Annotated[_AnthropicMessageStart, Tag("message_start" + _TAG)]
    | Annotated[_AnthropicBlockStart, Tag("content_block_start" + _TAG)]
    | Annotated[_AnthropicBlockDelta, Tag("content_block_delta" + _TAG)]
    | Annotated[_AnthropicMessageDelta, Tag("message_delta" + _TAG)]
    | Annotated[_AnthropicOther, Tag("other" + _TAG)],  # ping, a block's or message's stop
    Discriminator(_event_kind),
]
"""One event of a streamed Messages API reply, as ``AnthropicChatModel`` reads it."""

OPENAI_COMPLETION = TypeAdapter(_OpenAICompletion)
OPENAI_CHUNK = TypeAdapter(_OpenAIChunk)
ANTHROPIC_MESSAGE = TypeAdapter(_AnthropicMessage)
ANTHROPIC_EVENT: TypeAdapter[Any] = TypeAdapter(_AnthropicEvent)


def checked_answer(
    shape: TypeAdapter[_Shape],
    answer: object,
    *,
    model: str,
    base_url: object,
    api: str,
    secrets: tuple[str, ...],
) -> _Shape:
    """Return ``answer``, the client's object of a 200's JSON, read as ``shape``.

    Args:
        shape: What the answer must look like.
        answer: The client's object (or the list, ``None``... it gave for other JSON).
        model: The model's name, for the message.
        base_url: Where the model is, for the message.
        api: What the answer should be, e.g. ``"a chat completion"``.
        secrets: The keys to mask in the value shown.

    Raises:
        ModelError: with ``status`` 200, not ``retryable`` (the server would send the same
            again), naming the place in the answer, what is wrong there and the value.
    """
    try:
        return shape.validate_python(answer, from_attributes=True)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        place = "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}"
            for p in first["loc"]
            if not str(p).endswith(_TAG)
        )
        where = f"at {place.lstrip('.')}" if place else "as a whole"
        # Masked whole, then cut: a cut first could leave a part of a key unmasked.
        shown = mask(repr(first["input"]), secrets)
        shown = shown[:80] + ("..." if len(shown) > 80 else "")
        raise ModelError(
            f"Model {model!r} at {base_url} answered HTTP 200 with JSON that is not {api}: "
            f"{where}, {first['msg'][0].lower()}{first['msg'][1:]} (got {shown}). Check that "
            f"base_url is the root of a server that speaks this API; nodestep cannot read "
            f"a reply of this shape.",
            model=model,
            status=200,
            retryable=False,
        ) from None
