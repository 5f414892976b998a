"""graph.usage: a thread's tokens per node, per model and in all, and their cost, from the store."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import (
    END,
    START,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    model_node,
    node,
    tool,
)
from nodestep.agents import AssistantMessage, RemoveMessage, TokenUsage
from nodestep.store import StateStore
from nodestep.tracing import Usage, UsageTotals


@tool
def stock(item: str) -> int:
    """Return how many of the item are in stock."""
    return 12


@node
def idle(state: MessagesState) -> None:
    return None


def _two_models(store: StateStore) -> Graph[MessagesState]:
    """A graph whose two nodes call two models: a drafter, then a checker."""
    draft = model_node(
        ScriptedModel([ScriptedReply("draft", usage=(100, 10))], name="big"), name="draft"
    )
    # The checker's script answers by the conversation's assistant count: its first reply
    # is the second of the conversation.
    check = model_node(
        ScriptedModel(["-", ScriptedReply("checked", usage=(200, 5))], name="small"),
        name="check",
    )
    return Graph(MessagesState, state_store=store).flow(
        START >> draft, draft >> check, check >> END
    )


def test_usage_sums_per_node_per_model_and_for_the_thread() -> None:
    store = InMemoryStateStore()
    _two_models(store).invoke({"messages": "write"}, thread_id="t")
    usage = _two_models(store).usage_sync("t")
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
        2,
        300,
        15,
        315,
    )
    assert usage.by_node == {
        "draft": UsageTotals(calls=1, input_tokens=100, output_tokens=10, total_tokens=110),
        "check": UsageTotals(calls=1, input_tokens=200, output_tokens=5, total_tokens=205),
    }
    assert set(usage.by_model) == {"big", "small"}
    assert usage.cost is None and usage.unpriced == ()


def test_prices_give_the_cost_of_each_model_node_and_the_thread() -> None:
    store = InMemoryStateStore()
    _two_models(store).invoke({"messages": "write"}, thread_id="t")
    prices = {"big": (10.0, 30.0), "small": (1.0, 2.0)}
    usage = _two_models(store).usage_sync("t", prices=prices)
    big = 100 * 10.0 / 1e6 + 10 * 30.0 / 1e6
    small = 200 * 1.0 / 1e6 + 5 * 2.0 / 1e6
    assert usage.by_model["big"].cost == pytest.approx(big)
    assert usage.by_node["check"].cost == pytest.approx(small)
    assert usage.cost == pytest.approx(big + small)


def test_a_model_missing_from_the_price_table_gets_no_cost_and_is_named() -> None:
    store = InMemoryStateStore()
    _two_models(store).invoke({"messages": "write"}, thread_id="t")
    usage = _two_models(store).usage_sync("t", prices={"big": (10.0, 30.0)})
    assert usage.unpriced == ("small",)
    assert usage.cost is None
    assert usage.by_model["small"].cost is None and usage.by_node["check"].cost is None
    assert usage.by_model["big"].cost == pytest.approx(100 * 10.0 / 1e6 + 10 * 30.0 / 1e6)


@pytest.mark.parametrize(
    "prices",
    [{"m": (1.0,)}, {"m": (1.0, -2.0)}, {"m": ("1", 2.0)}, {"m": (float("nan"), 1.0)}, [1, 2]],
)
def test_a_bad_price_table_is_refused_naming_the_entry(prices: Any) -> None:
    store = InMemoryStateStore()
    _two_models(store).invoke({"messages": "write"}, thread_id="t")
    with pytest.raises(GraphConfigError, match=r"prices|price"):
        _two_models(store).usage_sync("t", prices=prices)


def test_usage_needs_only_the_store_not_the_graphs_flow() -> None:
    store = InMemoryStateStore()
    _two_models(store).invoke({"messages": "write"}, thread_id="t")
    reader = Graph(MessagesState, state_store=store)  # no flow declared
    assert reader.usage_sync("t").total_tokens == 315


def test_a_reply_removed_from_the_conversation_still_counts() -> None:
    store = InMemoryStateStore()
    agent = create_react_agent(
        ScriptedModel([ScriptedReply("first", usage=(10, 1)), ScriptedReply("2", usage=(20, 2))]),
        [stock],
        state_store=store,
    )
    agent.invoke({"messages": "a"}, thread_id="t")
    agent.update_state_sync("t", {"messages": [RemoveMessage(id="agent-2")]})
    agent.invoke({"messages": "b"}, thread_id="t")
    usage = agent.usage_sync("t")
    # The second run's conversation has no reply left, so the script answers "first" again.
    assert (usage.calls, usage.input_tokens) == (2, 20)


def test_a_reply_stored_twice_with_its_id_counts_once() -> None:
    store = InMemoryStateStore()
    agent = create_react_agent(
        ScriptedModel([ScriptedReply("hi", usage=(10, 1))]), [stock], state_store=store
    )
    agent.invoke({"messages": "a"}, thread_id="t")
    stored = agent.load_sync("t")["messages"][-1]
    edited = stored.model_copy(update={"content": "hello"})
    agent.update_state_sync("t", {"messages": [edited]})
    assert agent.usage_sync("t").calls == 1


def test_a_fork_counts_the_replies_before_its_fork_point_under_checkpoint() -> None:
    store = InMemoryStateStore()
    agent = create_react_agent(
        ScriptedModel([ScriptedReply("one", usage=(10, 1)), ScriptedReply("two", usage=(20, 2))]),
        [stock],
        state_store=store,
    )
    agent.invoke({"messages": "a"}, thread_id="t")
    at = agent.history_sync("t").events[-1].id
    agent.fork_sync("t", from_=at, name="alt")
    agent.invoke({"messages": "b"}, thread_id="t", branch_id="alt")
    usage = agent.usage_sync("t", branch_id="alt")
    assert usage.by_node["(checkpoint)"].input_tokens == 10
    assert usage.by_node["agent"].input_tokens == 20
    assert usage.total_tokens == 33
    assert agent.usage_sync("t").total_tokens == 11  # main is left as it was


def test_a_thread_without_model_calls_has_zero_usage() -> None:
    store = InMemoryStateStore()
    graph = Graph(MessagesState, state_store=store)
    usage = graph.usage_sync("nothing-here")
    assert usage == Usage(thread_id="nothing-here", branch_id="main")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 10**6), st.integers(0, 10**6)),
        max_size=6,
    )
)
def test_the_sums_per_node_and_per_model_add_up_to_the_thread(
    calls: list[tuple[str, int, int]],
) -> None:
    store = InMemoryStateStore()
    graph = Graph(MessagesState, state_store=store).flow(START >> idle, idle >> END)
    graph.invoke({}, thread_id="t")
    replies = [
        AssistantMessage(
            content="r",
            id=f"r-{n}",
            model=model,
            usage=TokenUsage(input_tokens=inputs, output_tokens=outputs),
        )
        for n, (model, inputs, outputs) in enumerate(calls)
    ]
    graph.update_state_sync("t", {"messages": replies})
    usage = graph.usage_sync("t", prices={"a": (1.0, 1.0), "b": (2.0, 0.5), "c": (0.0, 0.0)})
    assert usage.calls == len(calls)
    for part in (usage.by_node, usage.by_model):
        assert sum(t.input_tokens for t in part.values()) == usage.input_tokens
        assert sum(t.output_tokens for t in part.values()) == usage.output_tokens
        assert sum(t.cost or 0.0 for t in part.values()) == pytest.approx(usage.cost or 0.0)
    assert usage.total_tokens == sum(i + o for _, i, o in calls)
