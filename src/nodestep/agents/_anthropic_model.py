"""A chat model on Anthropic's Messages API, through the official ``anthropic`` package.

``anthropic`` is an optional extra (``pip install 'nodestep[anthropic]'``), imported when a
model is made, never when nodestep is imported. The wire format (system prompt, tool_use
and tool_result blocks, merged turns, stream events) is in ``_anthropic_wire``.

A failed request raises ``ModelError`` with the HTTP ``status`` and ``retryable`` set for a
408, a 429, a 5xx (529 is Anthropic's "overloaded"), a timeout or a lost connection, the
same as ``OpenAIChatModel``. An error event in the middle of a stream (the API answered
200, then sent ``overloaded_error``) gets the status its type stands for. Retrying is the
model node's job (``RetryPolicy(retry_on=retryable_model_error)``), so the client's own
``max_retries`` defaults to 0.

The key is never in a repr, a log line or an error: nodestep writes neither it nor the
request's headers anywhere, and masks it (every form of it) in an error built from an
answer, which a gateway may have written quoting the header; such an error is raised
without the SDK's as its cause. A 200 whose body is not JSON (a web page) is a
``ModelError`` that is not retryable; JSON that does not parse is one that is. The
client's own OpenTelemetry spans are off (where its version has them): the model node's
span already carries the call's GenAI attributes.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import TypeAdapter

from nodestep._errors import GraphConfigError, ModelError
from nodestep.agents._answer_shapes import ANTHROPIC_EVENT, ANTHROPIC_MESSAGE, checked_answer
from nodestep.agents._anthropic_wire import (
    StreamReader,
    anthropic_tool_choice,
    anthropic_tools,
    from_anthropic,
    to_anthropic,
)
from nodestep.agents._messages import AssistantMessage
from nodestep.agents._models import (
    MessageChunk,
    body_failure,
    http_failure,
    key_texts,
    quotes_secret,
)

__all__ = ["AnthropicChatModel"]

# The status an error event in a stream stands for (the response itself was a 200).
_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}

# Request fields the model fills in itself from its arguments.
_OWN_FIELDS = ("model", "messages", "system", "tools", "stream")


def _load_anthropic() -> Any:
    try:
        return importlib.import_module("anthropic")
    except ImportError:
        raise GraphConfigError(
            "AnthropicChatModel needs the anthropic package, which is not installed. "
            "Install the extra: pip install 'nodestep[anthropic]'"
        ) from None


class AnthropicChatModel:
    """A chat model served by Anthropic's Messages API (``/v1/messages``), e.g. Claude.

    The system messages become the request's ``system`` text; tool calls and results
    travel as ``tool_use`` and ``tool_result`` blocks; ``finish_reason`` is ``"stop"``,
    ``"tool_calls"``, ``"length"`` or ``"content_filter"`` for Anthropic's ``end_turn``,
    ``tool_use``, ``max_tokens`` and ``refusal``.

    Args:
        model: The model's name, e.g. ``"claude-sonnet-4-5"``.
        base_url: The API's root, e.g. ``"http://127.0.0.1:8000"``; ``None`` takes
            ``ANTHROPIC_BASE_URL``, or Anthropic's own.
        api_key: The key; ``None`` takes ``ANTHROPIC_API_KEY``. A server at a
            ``base_url`` of your own may need none.
        max_tokens: The most tokens a reply may have (the API asks for a bound).
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a tool's name; ``None``
            leaves it to the API (auto). ``complete`` and ``stream`` take one per call.
        timeout: Seconds one request may take.
        max_retries: How often the ``anthropic`` client itself tries a request again;
            0, since the node's ``RetryPolicy`` retries.
        params: More request fields, e.g. ``temperature=0``, ``stop_sequences=[...]``.

    Raises:
        GraphConfigError: the ``anthropic`` package is not installed, no key for
            Anthropic's own API, ``max_tokens`` below 1, or ``params`` names a field the
            model fills in itself.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        tool_choice: str | dict[str, Any] | None = None,
        timeout: float = 60.0,
        max_retries: int = 0,
        **params: Any,
    ) -> None:
        taken = sorted(set(params) & set(_OWN_FIELDS))
        if taken:
            raise GraphConfigError(
                f"AnthropicChatModel got {', '.join(taken)} as request fields, which the "
                f"model fills in itself: give the system prompt as a SystemMessage (or "
                f"model_node(system=...)), and the tools to the node."
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise GraphConfigError(
                f"AnthropicChatModel got max_tokens={max_tokens!r}: it is the most tokens a "
                f"reply may have, a whole number of at least 1, e.g. max_tokens=4096."
            )
        anthropic = _load_anthropic()
        self.name = model
        self.provider = "anthropic"  # gen_ai.provider.name on a model call's span
        self.max_tokens = max_tokens
        self.tool_choice = tool_choice
        self.params = params
        self._errors = (anthropic.APIError,)
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if key is None and base_url is None:
            raise GraphConfigError(
                f"AnthropicChatModel {model!r} has no API key: pass api_key=, or set the "
                f"ANTHROPIC_API_KEY environment variable."
            )
        options: dict[str, Any] = {}
        if "open_telemetry" in inspect.signature(anthropic.AsyncAnthropic).parameters:
            # The client's own span would repeat the token counts of the model node's
            # span, its parent, and a backend that adds them up would count them twice.
            options["open_telemetry"] = False
        # An explicit key: the client then looks for no other credentials (profiles...).
        self.client = anthropic.AsyncAnthropic(
            base_url=base_url,
            api_key=key or "none",
            timeout=timeout,
            max_retries=max_retries,
            **options,
        )

    def __repr__(self) -> str:
        # never the key: a repr ends up in logs and notebooks
        return f"AnthropicChatModel({self.name!r}, base_url={str(self.client.base_url)!r})"

    def _request(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]],
        tool_choice: str | dict[str, Any] | None,
    ) -> dict[str, Any]:
        system, turns = to_anthropic(messages)
        request: dict[str, Any] = {
            "model": self.name,
            "max_tokens": self.max_tokens,
            "messages": turns,
        }
        if self.params:
            # As JSON fields, not keywords: the SDK's keywords change between its
            # versions (one drops temperature), the API's fields do not.
            request["extra_body"] = self.params
        if system:
            request["system"] = system
        if tools:
            request["tools"] = anthropic_tools(tools)
        choice = tool_choice if tool_choice is not None else self.tool_choice
        if choice is not None:
            wire = anthropic_tool_choice(choice, tools, self.name)
            if wire is not None:
                request["tool_choice"] = wire
        return request

    def _failed(self, error: Exception) -> ModelError:
        status = getattr(error, "status_code", None)
        status = status if isinstance(status, int) else None
        if status is not None and status < 400:  # an error event inside a 200 stream
            status = _STATUS_OF_TYPE.get(_error_type(error))
        return http_failure(self.name, self.client.base_url, error, status, self._keys())

    def _keys(self) -> tuple[str, ...]:
        # auth_token: the client sends ANTHROPIC_AUTH_TOKEN as a bearer token when set.
        return key_texts(self.client.api_key, getattr(self.client, "auth_token", None))

    def _cause(self, error: Exception) -> Exception | None:
        """The SDK's error as the cause, unless its message shows the key."""
        return None if quotes_secret(error, self._keys()) else error

    async def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        *,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> AssistantMessage:
        """Return the model's reply to ``messages``.

        Args:
            messages: The conversation.
            tools: The tools' specs (``name``, ``description``, ``parameters``).
            tool_choice: This call's choice; ``None`` takes the model's.

        Raises:
            ModelError: the request failed (``retryable`` for a 408, 429, 5xx, timeout or
                lost connection), or a tool call's input is not a JSON object.
            GraphConfigError: a ``tool_choice`` that names no tool.
        """
        request = self._request(messages, tools, tool_choice)
        try:
            response = await self.client.messages.create(**request)
        except self._errors as error:
            raise self._failed(error) from self._cause(error)
        except json.JSONDecodeError as error:  # the SDK parses a JSON content type
            raise body_failure(self.name, self.client.base_url, None, error, self._keys()) from None
        if isinstance(response, str):  # the SDK's answer to a body of another content type
            raise body_failure(self.name, self.client.base_url, response, None, self._keys())
        message = self._checked(ANTHROPIC_MESSAGE, response, "a Messages API message")
        return from_anthropic(message, self.name)

    def _checked(self, shape: TypeAdapter[Any], answer: object, api: str) -> Any:
        return checked_answer(
            shape,
            answer,
            model=self.name,
            base_url=self.client.base_url,
            api=api,
            secrets=self._keys(),
        )

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        *,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> AsyncIterator[MessageChunk]:
        """Yield the model's reply in pieces, as the API sends them (server-sent events).

        Text deltas come as ``content``; a tool call's name and id, then the pieces of its
        input's JSON, as ``ToolCallChunk``s; the last chunk has the usage and the
        ``finish_reason``.

        Raises:
            ModelError: the request failed, the stream sent an error event, or it ended
                before the reply did (all but a 4xx are ``retryable``).
            GraphConfigError: a ``tool_choice`` that names no tool.
        """
        request = self._request(messages, tools, tool_choice)
        reader = StreamReader()
        try:
            async with await self.client.messages.create(**request, stream=True) as events:
                async for answer in events:
                    event = self._checked(ANTHROPIC_EVENT, answer, "a Messages API event")
                    chunk = reader.read(event)
                    if chunk is not None:
                        yield chunk
        except self._errors as error:
            raise self._failed(error) from self._cause(error)
        if not reader.stopped:
            # A cut connection ends the events without an error: the reply is unfinished.
            raise ModelError(
                f"Model {self.name!r} at {self.client.base_url} ended its stream before "
                f"the reply's message_stop event: the connection was cut. It may pass "
                f"on: retry it with RetryPolicy(retry_on=retryable_model_error).",
                model=self.name,
                retryable=True,
            )


def _error_type(error: Exception) -> str:
    """Return the ``error.type`` of an error's body (``"overloaded_error"``...), or ``""``."""
    body = getattr(error, "body", None)
    inner = body.get("error") if isinstance(body, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    return kind if isinstance(kind, str) else ""
