"""input_model=: the input of each run validated before the run starts."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from nodestep import (
    Command,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    StateUpdateError,
    create_react_agent,
    tool,
)
from nodestep.agents import Messages

pytestmark = pytest.mark.anyio


class Support(MessagesState):
    customer: str = ""
    tier: int = 0


class Ask(BaseModel):
    messages: Messages
    customer: str = Field(min_length=1)
    tier: int = Field(default=1, ge=1, le=3)


def _agent(store: InMemoryStateStore | None = None):
    model = ScriptedModel(["Hi Ada.", "Again?"])
    return create_react_agent(model, [], state=Support, input_model=Ask, state_store=store)


async def test_an_input_that_fits_runs_with_the_values_the_model_made():
    result = await _agent().ainvoke({"messages": "hello", "customer": "ada", "tier": "2"})
    assert (result.state.customer, result.state.tier) == ("ada", 2)
    assert result.state.messages[-1].content == "Hi Ada."


async def test_an_input_that_does_not_fit_is_refused_with_nothing_written():
    store = InMemoryStateStore()
    agent = _agent(store)
    with pytest.raises(StateUpdateError) as caught:
        await agent.ainvoke({"messages": "hello", "tier": 7}, thread_id="t")
    message = str(caught.value)
    assert message.startswith("The input of 'react_agent' does not fit its input model Ask:")
    assert "customer: Field required" in message and "tier: Input should be less" in message
    assert caught.value.writer == "input"
    assert not await agent.exists("t")


def test_every_way_to_run_checks_the_input():
    agent = _agent()
    with pytest.raises(StateUpdateError, match="input model Ask"):
        agent.invoke({"messages": "hi"})
    with pytest.raises(StateUpdateError, match="input model Ask"):
        list(agent.stream({"messages": "hi"}, stream_mode="values"))


async def test_astream_checks_the_input_before_the_first_event():
    with pytest.raises(StateUpdateError, match="input model Ask"):
        async for _ in _agent().astream({"customer": "ada"}, stream_mode="values"):
            pass


async def test_an_answer_to_a_pause_is_no_input_to_check():
    @tool(approve=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    model = ScriptedModel([ScriptedReply(tool_calls=[("refund", {"order": "A1"})]), "Done."])
    agent = create_react_agent(
        model, [refund], state=Support, input_model=Ask, state_store=InMemoryStateStore()
    )
    paused = await agent.ainvoke({"messages": "refund A1", "customer": "ada"}, thread_id="t")
    assert paused.status == "interrupted"
    done = await agent.ainvoke(Command(resume="approve"), thread_id="t")
    assert (done.state.messages[-1].content, done.state.customer) == ("Done.", "ada")


def test_an_input_model_that_is_no_model_or_has_fields_the_state_lacks_is_refused():
    with pytest.raises(GraphConfigError, match=r"input_model=.* is not a pydantic model class"):
        create_react_agent(ScriptedModel(["x"]), [], input_model={"messages": str})

    class Extra(BaseModel):
        messages: Messages
        budget: float

    with pytest.raises(GraphConfigError, match="has the fields budget, which the state Support"):
        create_react_agent(ScriptedModel(["x"]), [], state=Support, input_model=Extra)
