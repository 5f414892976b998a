"""A chat model on any OpenAI-compatible server, through the official ``openai`` package.

``openai`` is an optional extra (``pip install 'nodestep[openai]'``), imported when a
client is made, never when nodestep is imported.

Each reply carries the ``usage`` and ``finish_reason`` the server reports; a streamed
request asks for the usage with ``stream_options={"include_usage": True}`` (pass
``stream_options=`` to send your own instead, or ``None`` to a server that refuses it).

A failed request raises ``ModelError`` with the HTTP ``status`` and ``retryable`` set for a
408, a 429, a 5xx, a timeout or a lost connection; a stream that ends before its
``finish_reason`` and its ``data: [DONE]`` was cut, and is one too. A 200 whose body is not
JSON (a web page) is a ``ModelError`` that is not retryable; JSON that does not parse is
one that is; JSON of another shape is one that is not, naming the place (see
``_answer_shapes``). A server that answers a streamed request with one JSON reply (it ignores
``stream``) has that reply taken, as ``complete`` would. The key is masked in every error
message built from an answer, and such an error is raised without the SDK's as its cause.
Retrying is the node's job: give the model
node a ``RetryPolicy(retry_on=retryable_model_error)``, so each retry is a ``task_retried``
record in the thread's history, waits through the graph's clock, and obeys the policy's
deadline. The ``openai`` client's own ``max_retries`` therefore defaults to 0: both at
once would multiply the attempts.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
from pydantic import TypeAdapter

from nodestep._errors import GraphConfigError, ModelError
from nodestep.agents._answer_shapes import OPENAI_CHUNK, OPENAI_COMPLETION, checked_answer
from nodestep.agents._messages import AssistantMessage, TokenUsage, ToolCall
from nodestep.agents._models import (
    MessageChunk,
    ToolCallChunk,
    body_failure,
    http_failure,
    key_texts,
    quotes_secret,
    whole_text,
)

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
        max_retries: How often the ``openai`` client itself tries a request again after a
            429, a 5xx or a lost connection; 0, since the node's ``RetryPolicy`` retries.
        params: More request fields, e.g. ``temperature=0``; ``n`` only as 1.

    Raises:
        GraphConfigError: the ``openai`` package is not installed, or ``n`` asks for more
            than one reply.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 0,
        **params: Any,
    ) -> None:
        if params.get("n", 1) != 1:
            raise GraphConfigError(
                f"OpenAIChatModel got n={params['n']!r}: a model node takes one reply per "
                f"call, and would have to drop the others. Leave n out (or pass n=1), and "
                f"call the model again for another reply."
            )
        openai = _load_openai()
        self._openai = openai
        self.name = model
        self.provider = "openai"  # gen_ai.provider.name on a model call's span
        self.params = params
        self._errors = (openai.APIError,)
        key = api_key
        if key is None:
            key = os.environ.get("OPENAI_API_KEY") or "none"
        self.client = openai.AsyncOpenAI(
            base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries
        )

    def __repr__(self) -> str:
        # never the key: a repr ends up in logs and notebooks
        return f"OpenAIChatModel({self.name!r}, base_url={str(self.client.base_url)!r})"

    def _request(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]],
        tool_choice: str | None = None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.name,
            "messages": [to_openai(m) for m in messages],
            **self.params,
        }
        if tools:
            request["tools"] = [{"type": "function", "function": spec} for spec in tools]
            # The API refuses a tool_choice without tools; without tools it means nothing.
            if tool_choice in ("auto", "required", "none"):
                request["tool_choice"] = tool_choice
            elif tool_choice is not None:
                request["tool_choice"] = {"type": "function", "function": {"name": tool_choice}}
        return request

    def _failed(self, error: Exception) -> ModelError:
        status = getattr(error, "status_code", None)
        status = status if isinstance(status, int) else None
        return http_failure(self.name, self.client.base_url, error, status, self._keys())

    def _keys(self) -> tuple[str, ...]:
        return key_texts(self.client.api_key)

    def _cause(self, error: Exception) -> Exception | None:
        """The SDK's error as the cause, unless its message shows the key."""
        return None if quotes_secret(error, self._keys()) else error

    def _cut(self) -> ModelError:
        # A close-delimited stream that loses its connection ends like a whole one.
        return ModelError(
            f"Model {self.name!r} at {self.client.base_url} ended its stream before the "
            f"reply's finish_reason and its 'data: [DONE]': the connection was cut. It "
            f"may pass on: retry it with RetryPolicy(retry_on=retryable_model_error).",
            model=self.name,
            retryable=True,
        )

    def _several(self, count: int) -> ModelError:
        # Taking the first would drop the other replies without a word.
        return ModelError(
            f"Model {self.name!r} at {self.client.base_url} replied with {count} choices, "
            f"but a model node takes one reply. The request asked for one (no n=): set the "
            f"server to send one choice per request.",
            model=self.name,
        )

    async def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str | None = None,
    ) -> AssistantMessage:
        """Return the server's reply to ``messages``.

        ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or a tool's name) is sent
        as the request's ``tool_choice`` when there are tools.

        Raises:
            ModelError: the request failed (``retryable`` for a 429, 5xx or lost
                connection), or the reply has no choice or more than one.
        """
        try:
            response = await self.client.chat.completions.create(
                **self._request(messages, tools, tool_choice)
            )
        except self._errors as error:
            raise self._failed(error) from self._cause(error)
        except json.JSONDecodeError as error:  # the SDK parses a JSON content type
            raise body_failure(self.name, self.client.base_url, None, error, self._keys()) from None
        if isinstance(response, str):  # the SDK's answer to a body of another content type
            raise body_failure(self.name, self.client.base_url, response, None, self._keys())
        return self._reply(response)

    def _checked(self, shape: TypeAdapter[Any], answer: object, api: str) -> Any:
        return checked_answer(
            shape,
            answer,
            model=self.name,
            base_url=self.client.base_url,
            api=api,
            secrets=self._keys(),
        )

    def _reply(self, answer: Any) -> AssistantMessage:
        """Return the reply a chat completion carries."""
        response = self._checked(OPENAI_COMPLETION, answer, "a chat completion")
        if not response.choices:
            raise ModelError(f"Model {self.name!r} replied with no choices.", model=self.name)
        if len(response.choices) > 1:
            raise self._several(len(response.choices))
        choice = response.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(
                id=call.id,
                name=call.function.name,
                args=_arguments(call.function.arguments, call.function.name, self.name),
            )
            for call in message.tool_calls or ()
        )
        return AssistantMessage(
            content=whole_text(message.content or ""),
            tool_calls=calls,
            usage=_usage(response.usage),
            finish_reason=choice.finish_reason,
        )

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str | None = None,
    ) -> AsyncIterator[MessageChunk]:
        """Yield the server's reply in pieces, as it sends them (server-sent events).

        ``tool_choice`` is sent as by ``complete``.

        A server that ignores ``stream`` and answers one JSON reply has it taken, as one
        chunk.

        Raises:
            ModelError: the request failed (``retryable`` for a 429, 5xx or lost
                connection), the stream broke or ended before its ``finish_reason`` and
                ``[DONE]`` (retryable), or it sends more than one choice.
        """
        request = self._request(messages, tools, tool_choice)
        # The usage comes in a last chunk without choices, when asked for.
        request.setdefault("stream_options", {"include_usage": True})
        if request["stream_options"] is None:  # a server that refuses the field
            del request["stream_options"]
        finished = False
        try:
            events = await self.client.chat.completions.create(**request, stream=True)
            media = _media_type(events)
            if media == "application/json":
                yield _whole_chunk(await self._json_reply(events))
                return
            if media == "text/html":  # a web page, not events: the base URL is wrong
                page = (await events.response.aread()).decode("utf-8", "replace")
                await events.close()
                raise body_failure(self.name, self.client.base_url, page, None, self._keys())
            done = _DoneWatch.install(events)
            async for answer in events:
                try:
                    event = self._checked(OPENAI_CHUNK, answer, "a chat completion chunk")
                except ModelError:
                    await events.close()
                    raise
                if not event.choices:
                    if event.usage is not None:
                        yield MessageChunk(usage=_usage(event.usage))
                    continue
                if len(event.choices) > 1 or event.choices[0].index != 0:
                    await events.close()
                    raise self._several(max(len(event.choices), event.choices[0].index + 1))
                finished = finished or bool(event.choices[0].finish_reason)
                piece = _delta_chunk(event.choices[0])
                if piece is not None:
                    yield piece
        except self._errors as error:
            raise self._failed(error) from self._cause(error)
        if not (finished or done is None or done.seen):
            raise self._cut()

    async def _json_reply(self, events: Any) -> AssistantMessage:
        """Return the reply of a streamed request the server answered with one JSON body."""
        try:
            data = orjson.loads(await events.response.aread())
        except orjson.JSONDecodeError as error:
            raise body_failure(self.name, self.client.base_url, None, error, self._keys()) from None
        finally:
            await events.close()
        try:
            response = self._openai.types.chat.ChatCompletion.model_validate(data)
        except ValueError:  # pydantic's ValidationError
            raise ModelError(
                f"Model {self.name!r} at {self.client.base_url} answered a streamed request "
                f"with a JSON body that is not a chat completion (no events either). Check "
                f"that the server speaks the chat-completions API.",
                model=self.name,
            ) from None
        return self._reply(response)


def _delta_chunk(choice: Any) -> MessageChunk | None:
    """Return the chunk a streamed choice carries, or ``None`` for one that carries none."""
    delta, reason = choice.delta, choice.finish_reason
    pieces = tuple(
        ToolCallChunk(
            index=call.index,
            id=call.id,
            name=call.function.name if call.function else None,
            args=(call.function.arguments or "") if call.function else "",
        )
        for call in delta.tool_calls or ()
    )
    if not (delta.content or pieces or reason):
        return None
    return MessageChunk(content=delta.content or "", tool_call_chunks=pieces, finish_reason=reason)


def _media_type(events: Any) -> str:
    """Return the essence of a streamed answer's content type (``text/event-stream``...)."""
    response = getattr(events, "response", None)
    headers = getattr(response, "headers", None) or {}
    return str(headers.get("content-type", "")).split(";", 1)[0].strip().lower()


def _whole_chunk(reply: AssistantMessage) -> MessageChunk:
    """Return one chunk that ``assemble`` makes ``reply`` of again."""
    pieces = tuple(
        ToolCallChunk(index=i, id=call.id, name=call.name, args=orjson.dumps(call.args).decode())
        for i, call in enumerate(reply.tool_calls)
    )
    return MessageChunk(
        content=reply.content,
        tool_call_chunks=pieces,
        usage=reply.usage,
        finish_reason=reply.finish_reason,
    )


class _DoneWatch:
    """The SDK's server-sent-event decoder, noting whether the ``data: [DONE]`` event came.

    Why: the SDK's stream ends the same way after ``[DONE]`` and when a close-delimited
    body loses its connection, and a server may send ``[DONE]`` without any
    ``finish_reason``. The decoder is the one place that sees the event; it is an
    attribute of the SDK's stream, so ``install`` gives ``None`` for a stream without it,
    and the end of such a stream is then taken as it comes.
    """

    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder
        self.seen = False

    @classmethod
    def install(cls, events: Any) -> _DoneWatch | None:
        decoder = getattr(events, "_decoder", None)
        if not hasattr(decoder, "aiter_bytes"):
            return None
        watch = cls(decoder)
        events._decoder = watch
        return watch

    async def aiter_bytes(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        async for event in self._decoder.aiter_bytes(chunks):
            if str(getattr(event, "data", "")).startswith("[DONE]"):
                self.seen = True
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._decoder, name)


def _usage(reported: Any) -> TokenUsage | None:
    """Return the usage a response reports (``prompt_tokens`` ...), or ``None``."""
    if reported is None:
        return None
    return TokenUsage(
        input_tokens=reported.prompt_tokens or 0,
        output_tokens=reported.completion_tokens or 0,
        total_tokens=reported.total_tokens,
    )


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
