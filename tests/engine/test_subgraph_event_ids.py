"""Ids of a subgraph run's own records, given to ``at=`` or ``from_=``.

``subgraph_state`` numbers a child's records within its run, and their ids are not events
of the thread. A call given one says so and names the thread's event that holds it.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    UnknownThreadError,
    interrupt,
    node,
)
from nodestep.store import StateStore
from nodestep.testing import sequential_ids


class Contract(BaseState):
    signed_by: str = ""


def desk(store: StateStore) -> Graph[Contract]:
    """desk runs the subgraph legal, whose sign pauses."""

    @node
    def sign(state: Contract) -> dict[str, Any]:
        return {"signed_by": interrupt("sign?", id="approve")}

    legal = Graph(Contract, name="legal").flow(START >> sign, sign >> END)
    return Graph(Contract, name="desk", state_store=store, id_factory=sequential_ids()).flow(
        START >> legal, legal >> END
    )


def test_an_id_of_a_subgraph_record_names_the_event_that_holds_it(store: StateStore) -> None:
    graph = desk(store)
    graph.invoke({}, thread_id="t")
    child = graph.subgraph_state_sync("t", "legal")
    assert child.event_id is not None
    holder = next(
        e
        for e in graph.history_sync("t")
        if e.type == "subgraph" and e.record["id"] == child.event_id
    )
    for call in (
        lambda: graph.get_state_sync("t", at=child.event_id),
        lambda: graph.fork_sync("t", from_=child.event_id),
    ):
        with pytest.raises(UnknownThreadError) as refused:
            call()
        assert str(refused.value) == (
            f"Thread 't' has no event '{child.event_id}'. It is the id of a record of the "
            f"subgraph run at 'legal', numbered within that run (as subgraph_state gives it); "
            f"pass the id of the thread's event that holds it, '{holder.id}' (branch 'main')."
        )
    assert graph.get_state_sync("t", at=holder.id).status == "running"


def test_an_id_that_names_nothing_keeps_the_plain_advice(store: StateStore) -> None:
    graph = desk(store)
    graph.invoke({}, thread_id="t")
    with pytest.raises(UnknownThreadError, match="Take event ids from history"):
        graph.get_state_sync("t", at="no-such-id")
