"""A branch() router that returns Sends (LangGraph's map-reduce idiom) is told how to send."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphExecutionError,
    Send,
    add,
    branch,
    node,
)


class Items(BaseState):
    items: list[str] = Field(default_factory=list)
    item: str = ""
    out: Annotated[list[str], add] = Field(default_factory=list)


@node
def plan(state: Items) -> None:
    return None


@node
def work(state: Items) -> dict[str, Any]:
    return {"out": [state.item.upper()]}


def _refusal(router: Any) -> str:
    route = branch(router, {"work": work})
    graph = Graph(Items).flow(START >> plan, plan >> route, work >> END)
    with pytest.raises(GraphExecutionError) as info:
        graph.invoke({"items": ["a", "b"]})
    return str(info.value)


def test_a_router_returning_sends_is_told_to_send_from_the_node():
    message = _refusal(lambda s: [Send(work, {"item": i}) for i in s.items])
    assert message == (
        "The branch() router after 'plan' returned Send('work', {'item': 'a'}) in the list "
        "[Send('work', {'item': 'a'}), Send('work', {'item': 'b'})], but a router returns "
        "keys of its mapping ('work'), never a Send. To fan out, send from node 'plan' "
        "itself: return Command(goto=[Send('work', ...), ...]) (or one Send) from it, "
        "declared as @node(goto=['work']), in place of the branch()."
    )


def test_a_router_returning_one_send_gets_the_same_advice():
    message = _refusal(lambda s: Send("work", {"item": "a"}))
    assert message.startswith("The branch() router after 'plan' returned Send('work', {'item':")
    assert "never a Send. To fan out, send from node 'plan' itself" in message


def test_the_advised_node_runs_the_sends():
    @node(goto=[work])
    def fan(state: Items) -> Command:
        return Command(goto=[Send(work, {"item": i}) for i in state.items])

    graph = Graph(Items).flow(START >> fan, work >> END)
    assert graph.invoke({"items": ["a", "b"]}).state.out == ["A", "B"]
