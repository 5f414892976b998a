"""A conversation's JSON form is built in Python, as pydantic's dump gives it, and reads
back equal; a message the rule cannot vouch for takes the full path, with its error."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import StateStoreError
from nodestep._state.read_back import MISS
from nodestep._state.schema import StateSchema
from nodestep.agents import (
    AssistantMessage,
    MessagesState,
    RemoveMessage,
    SystemMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from nodestep.agents._conversation import MessageList

SPEC = StateSchema.of(MessagesState).fields["messages"]

texts = st.text(max_size=6)
maybe = st.none() | texts
counts = st.integers(0, 2**63 - 1)
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | texts,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(texts, inner, max_size=2),
    max_leaves=5,
)
calls = st.builds(ToolCall, name=texts, args=st.dictionaries(texts, plain, max_size=2), id=texts)
usages = st.builds(TokenUsage, input_tokens=counts, output_tokens=counts, total_tokens=counts)
messages = st.one_of(
    st.builds(SystemMessage, content=texts, id=maybe),
    st.builds(UserMessage, content=texts, id=maybe, name=maybe),
    st.builds(
        AssistantMessage,
        content=texts,
        tool_calls=st.lists(calls, max_size=2).map(tuple),
        id=maybe,
        model=maybe,
        usage=st.none() | usages,
        finish_reason=maybe,
    ),
    st.builds(
        ToolMessage,
        content=texts,
        tool_call_id=texts,
        name=texts,
        status=st.sampled_from(["ok", "error"]),
        id=maybe,
    ),
)


def _same_types(a: Any, b: Any) -> bool:
    return type(a) is type(b) and (
        not isinstance(a, list | tuple) or all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=4))
def test_the_built_form_is_pydantic_s_and_reads_back_equal(written: list[Any]) -> None:
    value = SPEC.validate(written, "test")
    assert type(value) is MessageList
    assert SPEC.exact_dump is not None
    built = SPEC.exact_dump(value)
    assert built is not MISS
    assert orjson.dumps(built) == orjson.dumps(SPEC.dump(value))  # key for key, in order
    assert SPEC.to_json(value) == built
    back = SPEC.from_json(orjson.loads(orjson.dumps(built)))
    assert type(back) is MessageList
    assert back == value and _same_types(list(back), list(value))


@pytest.mark.parametrize(
    "message",
    [
        UserMessage.model_construct(role="assistant", content="hi", id=None, name=None),
        AssistantMessage(usage=TokenUsage.model_construct(input_tokens=-1)),
        AssistantMessage(tool_calls=(ToolCall(name="t", args={"at": 1.5}),)),
        RemoveMessage(id="m1"),
    ],
    ids=["wrong role", "negative count", "a float argument", "a removal"],
)
def test_a_message_the_rule_cannot_vouch_for_takes_the_full_path(message: Any) -> None:
    assert SPEC.exact_dump is not None
    assert SPEC.exact_dump(MessageList([UserMessage(content="a"), message])) is MISS


def test_a_message_that_reads_back_different_is_refused_by_the_full_path() -> None:
    swapped = UserMessage.model_construct(role="assistant", content="hi", id=None, name=None)
    with pytest.raises(StateStoreError, match="Field 'messages' cannot be stored as JSON"):
        SPEC.to_json(MessageList([swapped]))


def test_a_float_argument_is_stored_by_the_full_path() -> None:
    value = MessageList([AssistantMessage(tool_calls=(ToolCall(name="t", args={"at": 1.5}),))])
    assert SPEC.to_json(value)[0]["tool_calls"][0]["args"] == {"at": 1.5}


def test_a_plain_list_takes_the_full_path() -> None:
    assert SPEC.exact_dump is not None
    assert SPEC.exact_dump([UserMessage(content="a")]) is MISS
