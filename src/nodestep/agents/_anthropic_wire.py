"""nodestep's messages in the Anthropic Messages API's wire format, and its replies back.

The Messages API differs from chat completions in four ways that matter here. The system
prompt is a top-level ``system`` field, not a message. A tool call is a ``tool_use``
content block of an assistant turn, and its result a ``tool_result`` block of the next
user turn. Turns must alternate: two user turns in a row (tool results, then the user's
next words) are one turn of several blocks. And a streamed reply is a sequence of typed
events (a block starts, grows by deltas, stops), where a text block and a tool call share
one index space.

This module only reshapes values; the client, its errors and retries are in
``_anthropic_model``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from nodestep._errors import GraphConfigError, ModelError
from nodestep.agents._messages import AssistantMessage, TokenUsage, ToolCall
from nodestep.agents._models import MessageChunk, ToolCallChunk, whole_text

__all__ = [
    "StreamReader",
    "anthropic_tool_choice",
    "anthropic_tools",
    "finish_reason",
    "from_anthropic",
    "read_usage",
    "to_anthropic",
]

# Anthropic's stop reasons in the words the other providers use, so code that checks
# ``finish_reason == "length"`` works on every model; any other reason passes as it is.
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

_CHOICES = {"auto": "auto", "required": "any", "any": "any", "none": "none"}


def to_anthropic(messages: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """Return the ``system`` text and the alternating turns that carry ``messages``.

    System messages join, in order, into the one system text. An assistant message with
    neither text nor tool calls, and a user message without text, carry nothing and are
    left out: the API refuses an empty turn.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # the API wants the roles to alternate
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def _blocks(message: Any) -> tuple[str, list[dict[str, Any]]]:
    """Return the role of the turn ``message`` belongs to, and its content blocks."""
    if message.role == "tool":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.status == "error":
            result["is_error"] = True
        return "user", [result]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
            for call in message.tool_calls
        ]
    return message.role, blocks


def anthropic_tools(specs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return tool specs (``name``, ``description``, ``parameters``) as Anthropic's tools."""
    out = []
    for spec in specs:
        tool: dict[str, Any] = {"name": spec["name"], "input_schema": spec["parameters"]}
        if spec.get("description"):
            tool["description"] = spec["description"]
        out.append(tool)
    return out


def anthropic_tool_choice(
    choice: str | dict[str, Any], specs: Sequence[dict[str, Any]], model: str
) -> dict[str, Any] | None:
    """Return nodestep's ``tool_choice`` as Anthropic's, or ``None`` to send none.

    ``"auto"`` lets the model choose, ``"required"`` (or ``"any"``) makes it call a tool,
    ``"none"`` forbids tools, and a tool's name makes it call that tool. A dict is sent as
    it is (Anthropic's own form, e.g. with ``disable_parallel_tool_use``).

    Raises:
        GraphConfigError: a name that is no tool's, or a call forced with no tools.
    """
    if isinstance(choice, dict):
        return choice
    names = [spec["name"] for spec in specs]
    kind = _CHOICES.get(choice)
    if not names and kind in ("auto", "none"):
        return None  # nothing to choose from: the API wants no tool_choice without tools
    if kind is None and choice not in names:
        raise GraphConfigError(
            f"AnthropicChatModel {model!r} got tool_choice={choice!r}, which is neither "
            f"'auto', 'required', 'none' nor a tool's name; the tools are "
            f"{', '.join(map(repr, names)) or 'none'}."
        )
    if not names:
        raise GraphConfigError(
            f"AnthropicChatModel {model!r} got tool_choice={choice!r} but no tools to call: "
            f"give the model tools, or use tool_choice='auto'."
        )
    return {"type": "tool", "name": choice} if kind is None else {"type": kind}


def finish_reason(stop_reason: str | None) -> str | None:
    """Return Anthropic's ``stop_reason`` as a ``finish_reason`` (``"stop"`` for end_turn...)."""
    if stop_reason is None:
        return None
    return _FINISH_REASONS.get(stop_reason, stop_reason)


def read_usage(reported: Any, prompt_tokens: int | None = None) -> TokenUsage | None:
    """Return the usage Anthropic reports, or ``None``.

    The prompt's tokens are ``input_tokens`` plus the tokens written to and read from the
    prompt cache: Anthropic counts those three apart. A stream's last usage may leave the
    input out (``input_tokens`` is null); ``prompt_tokens`` is then the count its first
    event gave.
    """
    if reported is None:
        return None
    fresh = getattr(reported, "input_tokens", None)
    if fresh is None and prompt_tokens is not None:
        prompt = prompt_tokens
    else:
        cached = [
            getattr(reported, field, None) or 0
            for field in ("cache_creation_input_tokens", "cache_read_input_tokens")
        ]
        prompt = (fresh or 0) + sum(cached)
    return TokenUsage(input_tokens=prompt, output_tokens=reported.output_tokens or 0)


def from_anthropic(response: Any, model: str = "") -> AssistantMessage:
    """Return a Messages API response as the reply: its text blocks and tool calls.

    Other blocks (thinking, server tools) are left out: nodestep's messages have no
    place for them.

    Raises:
        ModelError: a tool call's input is not a JSON object.
    """
    text = [block.text for block in response.content if block.type == "text"]
    calls = tuple(
        _tool_call(block, model) for block in response.content if block.type == "tool_use"
    )
    return AssistantMessage(
        content=whole_text("".join(text)),
        tool_calls=calls,
        usage=read_usage(response.usage),
        finish_reason=finish_reason(response.stop_reason),
    )


def _tool_call(block: Any, model: str) -> ToolCall:
    args = {} if block.input is None else block.input
    if not isinstance(args, dict):
        raise ModelError(
            f"Model {model!r} called tool {block.name!r} with the input {args!r}, which is "
            f"not a JSON object. A tool's arguments are an object of named values.",
            model=model,
        )
    return ToolCall(id=block.id, name=block.name, args=args)


class StreamReader:
    """Turn the events of a streamed reply into ``MessageChunk``s, one event at a time.

    Tool calls are numbered 0, 1, ... in the order they start, whatever the index of
    their content block: the text blocks before them count in Anthropic's index, not in
    nodestep's.

    Attributes:
        stopped: Whether the ``message_stop`` event came; a stream that ends before it
            was cut off.
    """

    def __init__(self) -> None:
        self.stopped = False
        self._calls: dict[int, int] = {}  # content block index -> tool call index
        self._input_tokens = 0

    def read(self, event: Any) -> MessageChunk | None:
        """Return the chunk ``event`` carries, or ``None`` for one that carries none."""
        kind = event.type
        if kind == "message_start":
            reported = read_usage(event.message.usage)
            self._input_tokens = reported.input_tokens if reported else 0
        elif kind == "content_block_start":
            return self._started(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            return MessageChunk(
                usage=read_usage(event.usage, self._input_tokens),
                finish_reason=finish_reason(event.delta.stop_reason),
            )
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _started(self, index: int, block: Any) -> MessageChunk | None:
        if block.type == "text":
            return MessageChunk(content=block.text) if block.text else None
        if block.type != "tool_use":
            return None
        call = self._calls[index] = len(self._calls)
        # The input comes in input_json_delta events; a start with the whole input is
        # read as its first piece.
        args = orjson.dumps(block.input).decode() if block.input else ""
        piece = ToolCallChunk(index=call, id=block.id, name=block.name, args=args)
        return MessageChunk(tool_call_chunks=(piece,))

    def _delta(self, index: int, delta: Any) -> MessageChunk | None:
        if delta.type == "text_delta":
            return MessageChunk(content=delta.text) if delta.text else None
        if delta.type == "input_json_delta" and index in self._calls:
            piece = ToolCallChunk(index=self._calls[index], args=delta.partial_json)
            return MessageChunk(tool_call_chunks=(piece,))
        return None  # thinking, signatures, citations: nothing a message holds
