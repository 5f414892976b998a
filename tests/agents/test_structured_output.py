"""response_format=: the final answer validated into a pydantic model, retried on a mismatch."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from nodestep import (
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    ModelError,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    tool,
)
from nodestep.agents import UserMessage

pytestmark = pytest.mark.anyio


class Ticket(BaseModel):
    title: str
    priority: int = Field(ge=1, le=3)


@tool
def lookup(order: str) -> str:
    """Look up an order."""
    return "late by 3 days"


async def test_the_final_answer_is_validated_into_the_state_after_tool_calls():
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("lookup", {"order": "A1"})]),
            '{"title": "Order A1 is late", "priority": 2}',
        ]
    )
    agent = create_react_agent(model, [lookup], response_format=Ticket, system="Be helpful.")
    result = await agent.ainvoke({"messages": "Where is A1?"})
    assert result.state.structured_response == Ticket(title="Order A1 is late", priority=2)
    # The model was told the schema in the system prompt, which is not stored.
    system = model.calls[0][0].content
    assert system.startswith("Be helpful.\n\nWhen you give your final answer")
    assert json.dumps(Ticket.model_json_schema(), sort_keys=True) in system
    assert all(m.role != "system" for m in result.state.messages)


async def test_an_answer_in_a_code_fence_is_read_from_the_fence():
    model = ScriptedModel(['```json\n{"title": "Down", "priority": 1}\n```'])
    agent = create_react_agent(model, [], response_format=Ticket)
    result = await agent.ainvoke({"messages": "Checkout is down!"})
    assert result.state.structured_response == Ticket(title="Down", priority=1)


async def test_a_mismatch_goes_back_to_the_model_with_the_validation_error():
    model = ScriptedModel(
        [
            '{"title": "Down", "priority": 9}',
            ScriptedReply('{"title": "Down", "priority": 1}', expect="priority: Input should"),
        ]
    )
    agent = create_react_agent(model, [], response_format=Ticket)
    result = await agent.ainvoke({"messages": "Checkout is down!"})
    assert result.state.structured_response == Ticket(title="Down", priority=1)
    correction = result.state.messages[2]
    assert isinstance(correction, UserMessage) and correction.name == "structured_output"
    assert correction.content.startswith("Your answer does not fit the Ticket schema: priority:")


async def test_a_model_that_never_fits_fails_after_the_last_attempt_naming_the_problem():
    model = ScriptedModel(["not json", '{"title": "x"}', '{"priority": 1}', "unused"])
    agent = create_react_agent(model, [], response_format=Ticket, response_attempts=3)
    with pytest.raises(ModelError) as caught:
        await agent.ainvoke({"messages": "Checkout is down!"})
    message = str(caught.value)
    assert message.startswith("The model's answer does not fit Ticket after 3 tries: title:")
    assert "'{\"priority\": 1}'" in message and "response_attempts=" in message
    assert caught.value.model == "scripted"
    assert len(model.calls) == 3


async def test_the_attempts_are_counted_per_turn_of_a_thread():
    model = ScriptedModel(
        [
            "oops",
            '{"title": "a", "priority": 1}',
            "oops again",
            '{"title": "b", "priority": 2}',
        ]
    )
    store = InMemoryStateStore()
    agent = create_react_agent(
        model, [], response_format=Ticket, response_attempts=2, state_store=store
    )
    first = await agent.ainvoke({"messages": "one"}, thread_id="t")
    second = await agent.ainvoke({"messages": "two"}, thread_id="t")
    assert first.state.structured_response.title == "a"
    assert second.state.structured_response.title == "b"
    # A new graph on the same store reads the structured answer back as a Ticket.
    again = create_react_agent(ScriptedModel([]), [], response_format=Ticket, state_store=store)
    snapshot = await again.get_state("t")
    assert snapshot.value.structured_response == Ticket(title="b", priority=2)


async def test_a_state_that_declares_the_field_keeps_its_own_class():
    class WithTicket(MessagesState):
        structured_response: Ticket | None = None
        note: str = ""

    model = ScriptedModel(['{"title": "t", "priority": 3}'])
    agent = create_react_agent(model, [], state=WithTicket, response_format=Ticket)
    result = await agent.ainvoke({"messages": "go", "note": "kept"})
    assert isinstance(result.state, WithTicket)
    assert (result.state.structured_response.priority, result.state.note) == (3, "kept")


@pytest.mark.parametrize("given", [Ticket(title="x", priority=1), {"type": "object"}, dict])
def test_a_response_format_that_is_not_a_model_class_is_refused(given):
    with pytest.raises(GraphConfigError, match="is not a pydantic model class"):
        create_react_agent(ScriptedModel(["x"]), [], response_format=given)


@pytest.mark.parametrize("attempts", [0, -1, True, 2.5])
def test_response_attempts_must_be_a_positive_int(attempts):
    with pytest.raises(GraphConfigError, match="response_attempts="):
        create_react_agent(
            ScriptedModel(["x"]), [], response_format=Ticket, response_attempts=attempts
        )
