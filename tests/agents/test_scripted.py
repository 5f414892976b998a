"""The scripted model: replies in order, read from the conversation, with checks."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import GraphConfigError, ModelError, ScriptedModel, ScriptedReply
from nodestep.agents import AssistantMessage, TokenUsage, ToolCall, ToolMessage, UserMessage
from nodestep.agents._models import assemble


async def _collect(model: ScriptedModel, messages: list) -> list:
    return [chunk async for chunk in model.stream(messages)]


def test_the_reply_is_chosen_by_the_assistant_messages_already_there():
    model = ScriptedModel(["first", "second"])
    hi = [UserMessage(content="hi")]
    assert anyio.run(model.complete, hi).content == "first"
    assert anyio.run(model.complete, hi).content == "first"  # same conversation, same reply
    later = [*hi, AssistantMessage(content="first"), UserMessage(content="more")]
    assert anyio.run(model.complete, later).content == "second"
    assert len(model.calls) == 3


def test_tool_calls_get_ids_from_the_reply_and_their_place():
    model = ScriptedModel([ScriptedReply("Looking.", tool_calls=[("search", {"q": "tea"})])])
    reply = anyio.run(model.complete, [UserMessage(content="hi")])
    assert reply.tool_calls == (ToolCall(name="search", args={"q": "tea"}, id="call-1-1"),)


def test_a_conversation_past_the_script_says_how_many_replies_there_are():
    model = ScriptedModel(["only"])
    talk = [UserMessage(content="hi"), AssistantMessage(content="only")]
    with pytest.raises(ModelError, match="asked for reply 2, but its script has 1") as caught:
        anyio.run(model.complete, talk)
    assert caught.value.model == "scripted"


def test_expect_checks_the_last_message():
    model = ScriptedModel([ScriptedReply("ok", expect="weather")])
    assert anyio.run(model.complete, [UserMessage(content="the weather?")]).content == "ok"
    with pytest.raises(ModelError, match="should contain 'weather'"):
        anyio.run(model.complete, [UserMessage(content="the news?")])


def test_stream_gives_words_then_tool_calls_and_assembles_into_the_reply():
    reply = ScriptedReply("It is warm.", tool_calls=[ToolCall(name="t", args={"a": 1}, id="x")])
    model = ScriptedModel([reply])
    chunks = anyio.run(_collect, model, [UserMessage(content="hi")])
    assert [c.content for c in chunks] == ["It", " is", " warm.", ""]
    whole = assemble(chunks, "m-1")
    assert whole == AssistantMessage(
        content="It is warm.",
        tool_calls=[ToolCall(name="t", args={"a": 1}, id="x")],
        id="m-1",
        usage=TokenUsage(input_tokens=1, output_tokens=5),
        finish_reason="tool_calls",
    )


def test_a_bad_script_is_refused_when_made():
    with pytest.raises(GraphConfigError, match="takes a list of replies"):
        ScriptedModel("one reply")  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match="Reply 1 of the script is a int"):
        ScriptedModel([1])  # type: ignore[list-item]
    with pytest.raises(GraphConfigError, match="Tool call 1 of reply 1"):
        ScriptedModel([ScriptedReply(tool_calls=["search"])])  # type: ignore[list-item]


def test_a_lone_surrogate_in_a_tool_calls_args_is_refused_when_the_script_is_given():
    call = ToolCall(name="t", args={"q": ["ok", {"r": "\ud800"}]}, id="c")
    with pytest.raises(GraphConfigError) as caught:
        ScriptedModel(["first", ScriptedReply(tool_calls=[call])])
    assert str(caught.value) == (
        "Reply 2 of the script: args['q'][1]['r'] of tool call 1 ('t') holds the lone "
        "surrogate '\\ud800' (half of a UTF-16 pair, such as a cut emoji), which UTF-8 "
        "cannot encode, so no model could send it. Write whole characters in the script, "
        "e.g. text.encode('utf-8', 'replace').decode() turns it into '?'."
    )


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (ScriptedReply("a \udc80"), "its content holds the lone surrogate '\\udc80' at index 2"),
        (
            AssistantMessage(tool_calls=[ToolCall(name="t", args={"\ud800": 1})]),
            "args['\\ud800'] (its key) of tool call 1 ('t') holds the lone surrogate",
        ),
        (
            ScriptedReply(tool_calls=[("t", {}), ("u\ud800", {})]),
            "the name of tool call 2 ('u\\ud800') holds the lone surrogate '\\ud800' at index 1",
        ),
        (
            ScriptedReply(tool_calls=[("t", {"n": 2**64})]),
            "args['n'] of tool call 1 ('t') is the int 18446744073709551616, beyond 64 bits",
        ),
        (
            ScriptedReply(tool_calls=[("t", {"s": {1}})]),
            "the args of tool call 1 ('t') have no JSON form (Type is not JSON serializable: set)",
        ),
    ],
)
def test_a_reply_no_model_could_send_is_refused_naming_the_place(reply: Any, message: str):
    with pytest.raises(GraphConfigError) as caught:
        ScriptedModel([reply])
    assert str(caught.value).startswith(f"Reply 1 of the script: {message}")


_ROLES = st.sampled_from(["user", "assistant", "tool"])


def _message(role: str, n: int) -> Any:
    if role == "assistant":  # every other reply calls a tool, whose call counts as words
        calls = [ToolCall(name="look", args={"q": f"x {n}"}, id=f"c{n}")] if n % 2 else []
        return AssistantMessage(content=f"a{n}", tool_calls=calls)
    if role == "tool":
        return ToolMessage(content=f"t{n} done", tool_call_id=f"c{n}")
    return UserMessage(content=f"u{n}")


def _words(conversation: list[Any]) -> int:
    """The words of a conversation as the model counts its input: each message's text, and
    each tool call's name and JSON arguments (``{"q":"x 3"}`` is two)."""
    calls = [c for m in conversation if m.role == "assistant" for c in m.tool_calls]
    return sum(len(m.content.split()) for m in conversation) + 3 * len(calls)


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 12), st.integers(0, 3), st.lists(_ROLES, max_size=6)),
        min_size=1,
        max_size=14,
    )
)
def test_the_reply_follows_the_count_of_assistant_messages_whatever_was_asked_before(
    calls: list[tuple[int, int, list[str]]],
) -> None:
    # Each call takes a conversation asked about before (or a new one), cut to a prefix
    # (a fork, a replay), maybe with one message rewritten (an edit), plus new messages:
    # the reply must be the one its count of assistant messages says, every time.
    model = ScriptedModel([f"reply {n}" for n in range(40)])
    asked: list[list[Any]] = [[]]
    for n, (pick, cut, roles) in enumerate(calls):
        base = list(asked[pick % len(asked)])
        base = base[: max(0, len(base) - cut)]
        if base and cut == 3:
            base[0] = _message("assistant" if base[0].role != "assistant" else "user", n)
        conversation = [*base, *(_message(role, n) for role in roles)]
        expected = sum(m.role == "assistant" for m in conversation)
        reply = anyio.run(model.complete, conversation)
        assert reply.content == f"reply {expected}"
        # ... and so is its input's count of words, which a kept conversation shortens.
        assert reply.usage is not None and reply.usage.input_tokens == _words(conversation)
        asked.append([*conversation, reply])
