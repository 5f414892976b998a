"""Dangling tool calls (a call without a result) are answered before the model sees them."""

from __future__ import annotations

import pytest
from chat_server import chat_server, completion
from hypothesis import given
from hypothesis import strategies as st

from nodestep import InMemoryStateStore, ScriptedModel, ScriptedReply, create_react_agent, tool
from nodestep.agents import (
    AssistantMessage,
    MessageList,
    OpenAIChatModel,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from nodestep.agents._repair import ToolCallRepair, repair_tool_calls

pytestmark = pytest.mark.anyio


@tool
def flaky(item: str) -> str:
    """Fetch an item from a service that is down."""
    raise ConnectionError("service down")


@tool
def stock(item: str) -> int:
    """Count an item in stock."""
    return 12


def _call(call_id: str, name: str = "stock") -> ToolCall:
    return ToolCall(name=name, args={"item": "mug"}, id=call_id)


async def test_a_call_left_without_result_by_a_failed_run_is_answered_for_the_next_call():
    store = InMemoryStateStore()
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("flaky", {"item": "mug"})]), "Sorry, try again later."]
    )
    agent = create_react_agent(model, [flaky], handle_errors=False, state_store=store)
    with pytest.raises(ConnectionError):
        await agent.ainvoke({"messages": "how many mugs?"}, thread_id="t")

    result = await agent.ainvoke({"messages": "hello?"}, thread_id="t")
    sent = model.calls[-1]
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    answer = sent[2]
    assert (answer.tool_call_id, answer.name, answer.status) == ("call-1-1", "flaky", "error")
    assert answer.content.startswith("Error: this call of flaky did not run")
    # Only the copy sent was repaired: the stored conversation is what happened.
    stored = [m.role for m in result.state.messages]
    assert stored == ["user", "assistant", "user", "assistant"]


async def test_an_abandoned_approval_leaves_no_call_the_provider_would_refuse():
    @tool(approve=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    store = InMemoryStateStore()
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("refund", {"order": "A1"})]), "What else can I do?"]
    )
    agent = create_react_agent(model, [refund], state_store=store)
    paused = await agent.ainvoke({"messages": "refund A1"}, thread_id="t")
    assert paused.status == "interrupted"
    # The user does not answer the approval: the thread is forked before the tool step
    # and gets new input, so the refund call never gets a result.
    history = await agent.history("t")
    before_tools = [e for e in history if e.type == "superstep_completed"][-1]
    await agent.fork("t", from_=before_tools.id, name="alt")
    result = await agent.ainvoke({"messages": "never mind"}, thread_id="t", branch_id="alt")
    assert result.state.messages[-1].content == "What else can I do?"
    sent = model.calls[-1]
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].tool_call_id == "call-1-1" and sent[2].status == "error"


def test_only_the_calls_without_results_get_one_after_the_results_there_are():
    messages = [
        UserMessage(content="q", id="m1"),
        AssistantMessage(tool_calls=(_call("a"), _call("b"), _call("c")), id="m2"),
        ToolMessage(content="12", tool_call_id="b", id="m3"),
        UserMessage(content="q2", id="m4"),
    ]
    repaired = repair_tool_calls(messages)
    assert [getattr(m, "tool_call_id", m.id) for m in repaired] == ["m1", "m2", "b", "a", "c", "m4"]
    assert all(m.status == "error" for m in repaired[3:5])


def test_a_conversation_without_dangling_calls_is_returned_itself():
    messages = [
        UserMessage(content="q"),
        AssistantMessage(tool_calls=(_call("a"),)),
        ToolMessage(content="12", tool_call_id="a"),
        AssistantMessage(content="12 mugs"),
    ]
    assert repair_tool_calls(messages) is messages


def test_calls_at_the_end_of_the_conversation_are_answered_too():
    messages = [UserMessage(content="q"), AssistantMessage(tool_calls=(_call("a"),))]
    repaired = repair_tool_calls(messages)
    assert [m.role for m in repaired] == ["user", "assistant", "tool"]


_turn = st.tuples(
    st.integers(min_value=0, max_value=3),  # calls
    st.sets(st.integers(min_value=0, max_value=3)),  # which of them have results
    st.booleans(),  # a user message follows
)


def _conversation(turns: list) -> list:
    messages: list = []
    for turn, (count, answered, then_user) in enumerate(turns):
        calls = tuple(_call(f"{turn}-{i}") for i in range(count))
        messages.append(AssistantMessage(content="" if calls else "text", tool_calls=calls))
        results = [c for i, c in enumerate(calls) if i in answered]
        messages += [ToolMessage(content="ok", tool_call_id=c.id) for c in results]
        if then_user:
            messages.append(UserMessage(content="next"))
    return messages


@given(st.lists(_turn, max_size=6))
def test_after_repair_every_call_is_answered_before_the_next_message(turns):
    messages = _conversation(turns)
    repaired = list(repair_tool_calls(messages))
    # Nothing was lost or moved: without the added messages it is the input.
    added = [m for m in repaired if m not in messages]
    assert [m for m in repaired if m in messages] == messages
    assert all(m.status == "error" for m in added)
    # Every call is answered right after its message, before any other message.
    for index, message in enumerate(repaired):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            following = []
            for later in repaired[index + 1 :]:
                if not isinstance(later, ToolMessage):
                    break
                following.append(later.tool_call_id)
            assert sorted(following) == sorted(c.id for c in message.tool_calls)
    assert list(repair_tool_calls(repaired)) == repaired  # a repaired one needs nothing


@pytest.mark.slow  # imports openai
async def test_a_server_that_refuses_dangling_calls_takes_the_repaired_conversation():
    pytest.importorskip("openai")
    with chat_server() as server:
        server.strict_tool_calls = True
        server.answers.append(
            completion(tool_calls=[{"id": "c1", "name": "flaky", "arguments": '{"item": "mug"}'}])
        )
        server.answers.append(completion("The service is down; try later."))
        model = OpenAIChatModel("local-model", base_url=server.url, api_key="k")
        agent = create_react_agent(
            model, [flaky], handle_errors=False, stream=False, state_store=InMemoryStateStore()
        )
        with pytest.raises(ConnectionError):
            await agent.ainvoke({"messages": "how many mugs?"}, thread_id="t")
        result = await agent.ainvoke({"messages": "hello?"}, thread_id="t")
    assert result.state.messages[-1].content == "The service is down; try later."
    sent = server.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == "c1"


@given(st.lists(_turn, max_size=6), st.lists(_turn, max_size=4))
def test_a_node_s_repair_that_keeps_the_last_conversation_gives_the_same_result(turns, other):
    """Growing conversations (each a new MessageList, as add_messages makes them) and an
    unrelated one in between: the kept conversation changes the cost, never the result."""
    repair = ToolCallRepair()
    whole = _conversation(turns)
    lists = [MessageList(whole[:n]) for n in range(len(whole) + 1)]
    lists.insert(len(lists) // 2, MessageList(_conversation(other)))
    for messages in lists:
        assert list(repair(messages)) == list(repair_tool_calls(messages))
        assert list(repair(list(messages))) == list(repair_tool_calls(messages))


def test_a_private_memory_changed_in_place_is_scanned_again():
    repair = ToolCallRepair()
    memory = [UserMessage(content="q"), AssistantMessage(tool_calls=(_call("a"),))]
    memory.append(ToolMessage(content="12", tool_call_id="a"))
    assert repair(memory) is memory
    memory.append(AssistantMessage(tool_calls=(_call("b"),)))
    memory.append(UserMessage(content="and?"))  # b never answered, same list object
    assert [m.role for m in repair(memory)][-3:] == ["assistant", "tool", "user"]
