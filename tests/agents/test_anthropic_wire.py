"""The Anthropic wire format: turns that alternate, and a streamed reply equal to a whole one."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from anthropic_server import events_of, reply, text, tool_use
from hypothesis import given
from hypothesis import strategies as st

from nodestep.agents import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from nodestep.agents._anthropic_wire import StreamReader, from_anthropic, to_anthropic
from nodestep.agents._models import assemble

anthropic_types = pytest.importorskip("anthropic.types")
pydantic = pytest.importorskip("pydantic")

EVENT = pydantic.TypeAdapter(anthropic_types.RawMessageStreamEvent)

words = st.text(st.sampled_from("ab ."), max_size=6)
ids = st.text(st.sampled_from("xyz0123"), min_size=1, max_size=4)
args = st.dictionaries(
    st.sampled_from(["topic", "n", "q"]), st.integers(0, 9) | st.text("ab", max_size=3)
)
calls = st.lists(st.builds(ToolCall, name=st.just("specs"), args=args, id=ids), max_size=2)
messages = st.lists(
    st.one_of(
        st.builds(SystemMessage, content=words),
        st.builds(UserMessage, content=words),
        st.builds(AssistantMessage, content=words, tool_calls=calls),
        st.builds(
            ToolMessage,
            content=words,
            tool_call_id=ids,
            status=st.sampled_from(["ok", "error"]),
        ),
    ),
    max_size=8,
)


def _expected_blocks(message: Any) -> list[dict[str, Any]]:
    """The blocks one message should become, said plainly, to compare with the turns."""
    if message.role == "tool":
        block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        return [
            {**block, "content": message.content}
            | ({"is_error": True} if message.status == "error" else {})
        ]
    out = [{"type": "text", "text": message.content}] if message.content else []
    for call in getattr(message, "tool_calls", ()):
        out.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    return out


@pytest.mark.slow
@given(messages)
def test_turns_alternate_are_never_empty_and_keep_every_block_in_order(conversation):
    system, turns = to_anthropic(conversation)
    assert system == "\n\n".join(
        m.content for m in conversation if m.role == "system" and m.content
    )
    assert all(turn["content"] for turn in turns)
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(turns))
    sent = [block for turn in turns for block in turn["content"]]
    assert sent == [b for m in conversation if m.role != "system" for b in _expected_blocks(m)]
    for turn in turns:  # a tool result only ever travels in a user turn
        kinds = {block["type"] for block in turn["content"]}
        assert turn["role"] == ("assistant" if "tool_use" in kinds else turn["role"])
        assert "tool_result" not in kinds or turn["role"] == "user"


blocks = st.lists(
    st.one_of(
        st.builds(text, words),
        st.builds(tool_use, ids.map(lambda i: "tu_" + i), st.just("specs"), args),
    ),
    max_size=4,
)


@pytest.mark.slow
@given(
    blocks,
    st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal", "pause_turn"]),
    st.integers(0, 99),
    st.integers(0, 99),
    st.none() | st.integers(0, 99),
)
def test_a_streamed_reply_assembles_into_the_same_message_as_the_whole_reply(
    content, stop_reason, input_tokens, output_tokens, cache_read
):
    body = reply(
        *content,
        stop_reason=stop_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read=cache_read,
    )
    reader = StreamReader()
    # The SDK drops pings before it parses an event; so does this test.
    events = [EVENT.validate_python(e) for e in events_of(body) if e["type"] != "ping"]
    chunks = [reader.read(event) for event in events]
    streamed = assemble([c for c in chunks if c is not None], message_id="m")
    whole = from_anthropic(anthropic_types.Message.model_validate(body))
    assert reader.stopped
    assert streamed == whole.model_copy(update={"id": "m"})
