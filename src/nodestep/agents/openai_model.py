"""A chat model on any OpenAI-compatible server, through the official ``openai`` package.

``openai`` is an optional extra (``pip install 'nodestep[openai]'``), imported when a
client is made, never when nodestep is imported. Retries of 429 and 5xx answers are the
``openai`` client's own (``max_retries``, with its backoff, honouring ``Retry-After``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson

from nodestep.agents.messages import AssistantMessage, ToolCall
from nodestep.agents.models import MessageChunk, ToolCallChunk
from nodestep.errors import GraphConfigError, ModelError

__all__ = ["OpenAIChatModel", "to_openai"]


def _load_openai() -> Any:
    try:
        return importlib.import_module("openai")
    except ImportError:
        raise GraphConfigError(
            "OpenAIChatModel needs the openai package, which is not installed. Install the "
            "extra: pip install 'nodestep[openai]'"
        ) from None


def to_openai(message: Any) -> dict[str, Any]:
    """Return a message in the chat-completions wire format."""
    role = message.role
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": orjson.dumps(call.args).decode()},
                }
                for call in message.tool_calls
            ]
        return out
    if role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out = {"role": role, "content": message.content}
    if role == "user" and message.name:
        out["name"] = message.name
    return out


class OpenAIChatModel:
    """A chat model served by an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        model: The model's name on the server, e.g. ``"gpt-4o-mini"``.
        base_url: The server's API root, e.g. ``"http://127.0.0.1:8000/v1"``; ``None``
            takes ``OPENAI_BASE_URL``, or OpenAI's own.
        api_key: The key; ``None`` takes ``OPENAI_API_KEY``, or ``"none"`` for a local
            server that asks for no key.
        timeout: Seconds one request may take.
        max_retries: How often a request is tried again after a 429, a 5xx or a lost
            connection, with the ``openai`` client's backoff.
        params: More request fields, e.g. ``temperature=0``.

    Raises:
        GraphConfigError: the ``openai`` package is not installed.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        **params: Any,
    ) -> None:
        openai = _load_openai()
        self.name = model
        self.params = params
        self._errors = (openai.APIError,)
        key = api_key
        if key is None:
            key = os.environ.get("OPENAI_API_KEY") or "none"
        self.client = openai.AsyncOpenAI(
            base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries
        )

    def _request(self, messages: Sequence[Any], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.name,
            "messages": [to_openai(m) for m in messages],
            **self.params,
        }
        if tools:
            request["tools"] = [{"type": "function", "function": spec} for spec in tools]
        return request

    def _failed(self, error: Exception) -> ModelError:
        status = getattr(error, "status_code", None)
        code = f" (HTTP {status})" if status else ""
        return ModelError(
            f"Model {self.name!r} at {self.client.base_url} failed{code}: {error}. Check the "
            f"base URL, the model name and the key; a 429 or 5xx was tried again "
            f"{self.client.max_retries} times (max_retries=).",
            model=self.name,
        )

    async def complete(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]] = ()
    ) -> AssistantMessage:
        """Return the server's reply to ``messages``.

        Raises:
            ModelError: the request failed after its retries, or the reply is empty.
        """
        try:
            response = await self.client.chat.completions.create(**self._request(messages, tools))
        except self._errors as error:
            raise self._failed(error) from error
        if not response.choices:
            raise ModelError(f"Model {self.name!r} replied with no choices.", model=self.name)
        message = response.choices[0].message
        calls = tuple(
            ToolCall(
                id=call.id,
                name=call.function.name,
                args=_arguments(call.function.arguments, call.function.name, self.name),
            )
            for call in message.tool_calls or ()
        )
        return AssistantMessage(content=message.content or "", tool_calls=calls)

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]] = ()
    ) -> AsyncIterator[MessageChunk]:
        """Yield the server's reply in pieces, as it sends them (server-sent events).

        Raises:
            ModelError: the request failed after its retries, or the stream broke.
        """
        request = self._request(messages, tools)
        try:
            events = await self.client.chat.completions.create(**request, stream=True)
            async for event in events:
                if not event.choices:
                    continue
                delta = event.choices[0].delta
                pieces = tuple(
                    ToolCallChunk(
                        index=call.index,
                        id=call.id,
                        name=call.function.name if call.function else None,
                        args=(call.function.arguments or "") if call.function else "",
                    )
                    for call in delta.tool_calls or ()
                )
                if delta.content or pieces:
                    yield MessageChunk(content=delta.content or "", tool_call_chunks=pieces)
        except self._errors as error:
            raise self._failed(error) from error


def _arguments(text: str | None, tool: str, model: str) -> dict[str, Any]:
    try:
        args = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        raise ModelError(
            f"Model {model!r} called tool {tool!r} with arguments {text!r}, which are not a "
            f"JSON object. A model that cannot write JSON tool calls cannot use tools.",
            model=model,
        )
    return args
