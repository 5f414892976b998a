"""A model server's 200 whose JSON is not the API's shape (a list, a null, a list where
text belongs, a number where a name belongs) is a ``ModelError`` naming the place and the
value, never a raw ``AttributeError`` or ``TypeError`` from reading it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_server import Answer as AnthropicAnswer
from anthropic_server import events_of, messages_server, reply, text
from chat_server import Answer, chat_server, chunk, completion

from nodestep import ModelError
from nodestep.agents import AnthropicChatModel, OpenAIChatModel, UserMessage

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytestmark = pytest.mark.anyio

HI = [UserMessage(content="hi")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the clients' transports run on asyncio


def _completion(**message: Any) -> dict[str, Any]:
    body = completion("x").body
    assert body is not None
    body["choices"][0]["message"].update(message)
    return body


def _call(**function: Any) -> list[dict[str, Any]]:
    return [{"id": "c1", "type": "function", "function": {"name": "t", **function}}]


def _stopped(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    last = chunk({})
    last["choices"][0]["finish_reason"] = "stop"
    return [*chunks, last]


@pytest.mark.slow  # the first test of the module makes the first openai client
@pytest.mark.parametrize(
    ("body", "place"),
    [
        ([1, 2], "as a whole, input should be a valid dictionary"),
        (None, "as a whole, input should be a valid dictionary"),
        ({"choices": "abc"}, "at choices, input should be a valid list (got 'abc')"),
        (_completion(content=[{"type": "text", "text": "hi"}]), "at choices[0].message.content"),
        (_completion(content=5), "at choices[0].message.content, input should be a valid string"),
        (_completion(tool_calls=[{"id": "c", "function": None}]), "tool_calls[0].function, input"),
        (_completion(tool_calls=_call(name=None)), "tool_calls[0].function.name, input"),
        ({**_completion(), "usage": "lots"}, "at usage, input should be a valid dictionary"),
    ],
)  # fmt: skip
async def test_a_completion_of_another_shape_is_a_model_error_naming_the_place(
    body: object, place: str
) -> None:
    with chat_server() as server:
        server.answers.append(Answer(raw=json.dumps(body).encode()))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="test-key")
        with pytest.raises(ModelError) as caught:
            await model.complete(HI)
    message = str(caught.value)
    assert message.startswith(f"Model 'local-model' at {server.url}/ answered HTTP 200 with JSON")
    assert "that is not a chat completion: " in message and place in message
    assert (caught.value.status, caught.value.retryable) == (200, False)


@pytest.mark.parametrize(
    ("events", "place"),
    [
        ([[1, 2]], "as a whole, input should be a valid dictionary or object"),
        (_stopped(chunk({"content": [{"type": "text"}]})), "at choices[0].delta.content, input"),
        (_stopped(chunk({"tool_calls": [{"id": "c1"}]})), "delta.tool_calls[0].index, input"),
    ],
)  # fmt: skip
async def test_a_streamed_chunk_of_another_shape_is_a_model_error_naming_the_place(
    events: list[Any], place: str
) -> None:
    with chat_server() as server:
        server.answers.append(Answer(events=events))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="test-key")
        with pytest.raises(ModelError, match="not a chat completion chunk") as caught:
            async for _ in model.stream(HI):
                pass
    assert place in str(caught.value)


async def test_a_usage_chunk_with_null_choices_is_still_read() -> None:
    usage = {**chunk({}), "choices": None, "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    with chat_server() as server:
        server.answers.append(Answer(events=[*_stopped(chunk({"content": "ok"})), usage]))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="test-key")
        pieces = [piece async for piece in model.stream(HI)]
    assert "".join(p.content for p in pieces) == "ok"
    assert pieces[-1].usage is not None and pieces[-1].usage.input_tokens == 3


@pytest.mark.parametrize(
    ("body", "place"),
    [
        ([1], "as a whole, input should be a valid dictionary"),
        ({**reply(text("hi")), "content": "hi"}, "at content, input should be a valid list"),
        ({**reply(text("hi")), "content": [{"text": "x"}]}, "at content[0].type, input should"),
        ({**reply(text("hi")), "content": [{"type": "text", "text": 5}]}, "at content[0].text, "),
        ({**reply(text("hi")), "stop_reason": 5}, "at stop_reason, input should be a valid str"),
    ],
)  # fmt: skip
async def test_a_messages_reply_of_another_shape_is_a_model_error_naming_the_place(
    body: object, place: str
) -> None:
    with messages_server() as server:
        server.answers.append(AnthropicAnswer(raw=json.dumps(body).encode()))
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k", max_tokens=8)
        with pytest.raises(ModelError, match="not a Messages API message") as caught:
            await model.complete(HI)
    assert place in str(caught.value)
    assert (caught.value.status, caught.value.retryable) == (200, False)


def _broken(kind: str, **fields: Any) -> list[dict[str, Any]]:
    events = events_of(reply(text("hi there")))
    return [{**e, **fields} if e["type"] == kind else e for e in events]


@pytest.mark.parametrize(
    ("events", "place"),
    [
        (_broken("message_start", message=None), "at message, input should be a valid dict"),
        (_broken("content_block_start", content_block=None), "at content_block, input"),
        (_broken("content_block_delta", delta={"type": "text_delta", "text": 5}), "at delta.text,"),
        (_broken("message_delta", usage="x"), "at usage, input should be a valid dictionary"),
    ],
)  # fmt: skip
async def test_a_messages_event_of_another_shape_is_a_model_error_naming_the_place(
    events: list[dict[str, Any]], place: str
) -> None:
    with messages_server() as server:
        server.answers.append(AnthropicAnswer(events=events))
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k", max_tokens=8)
        with pytest.raises(ModelError, match="not a Messages API event") as caught:
            async for _ in model.stream(HI):
                pass
    assert place in str(caught.value)


async def test_the_value_shown_has_the_key_masked() -> None:
    with chat_server() as server:
        server.answers.append(
            Answer(raw=json.dumps({"choices": "key test-key-123 refused"}).encode())
        )
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="test-key-123")
        with pytest.raises(ModelError) as caught:
            await model.complete(HI)
    assert "test-key-123" not in str(caught.value) and "**********" in str(caught.value)
