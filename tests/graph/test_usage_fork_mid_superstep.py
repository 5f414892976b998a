"""graph.usage of a fork taken between two parallel model calls counts both calls.

The fork's opening checkpoint holds the call that finished before the fork as a finished
task (``done``), not yet merged into its values; the branch has no record of it either.
"""

from __future__ import annotations

from typing import Any

from nodestep import (
    END,
    START,
    Graph,
    InMemoryStateStore,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    model_node,
    node,
)


@node
def begin(state: MessagesState) -> dict[str, Any]:
    return {}


def test_a_fork_between_two_model_calls_counts_the_one_its_checkpoint_holds() -> None:
    store = InMemoryStateStore()
    # Two replies each: whichever call finished first, the fork makes the other again.
    first = model_node(
        ScriptedModel([ScriptedReply("one", usage=(100, 10))] * 2, name="m1"),
        name="a",
        stream=False,
    )
    second = model_node(
        ScriptedModel([ScriptedReply("two", usage=(200, 20))] * 2, name="m2"),
        name="b",
        stream=False,
    )
    graph = Graph(MessagesState, state_store=store).flow(
        START >> begin, begin >> [first, second], first >> END, second >> END
    )
    graph.invoke({"messages": "hi"}, thread_id="t")
    finished = [e for e in graph.history_sync("t") if e.type == "task_finished"]
    graph.fork_sync("t", from_=finished[0].id, name="alt")
    graph.invoke(None, thread_id="t", branch_id="alt")
    before = finished[0].data["node"]  # the call the fork's checkpoint holds

    usage = graph.usage_sync("t", branch_id="alt")

    assert (usage.calls, usage.total_tokens) == (2, 330)
    assert {node: totals.calls for node, totals in usage.by_node.items()} == {"a": 1, "b": 1}
    assert usage.by_node[before].calls == 1
