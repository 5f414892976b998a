"""``update_state(as_node=...)`` on a completed thread can plan a superstep; the thread's
status in ``list_threads`` then says ``unfinished``, as ``get_state`` says ``running``.

The ``state_updated`` record holds the node's routes; when they plan a task (a node, a
``Send``, a route held for a deferred node, a join whose sources have all arrived), the
thread waits for ``invoke(None)`` to go on, and a listing of unfinished threads must find
it. Routes that plan nothing (``END``, a join still waiting) leave it completed.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Graph, add, node
from nodestep.store import StateStore, status_after

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Trip(BaseState):
    path: Annotated[list[str], add] = Field(default_factory=list)


def _stop(name: str, *, defer: bool = False) -> Any:
    def visit(state: Trip) -> dict[str, Any]:
        return {"path": [name]}

    return node(visit, name=name, defer=defer)


def _graph(store: StateStore) -> Graph[Trip]:
    plan, hotel, flight, seat, pay, last = map(
        _stop, ("plan", "hotel", "flight", "seat", "pay", "last")
    )
    report = _stop("report", defer=True)
    return Graph(Trip, state_store=store).flow(
        START >> plan >> [hotel, flight, last],
        flight >> seat,
        [hotel, seat] >> pay >> END,
        last >> report >> END,
    )


@pytest.mark.slow
async def test_list_threads_says_unfinished_when_update_as_node_plans_a_superstep(
    store: StateStore,
) -> None:
    graph = _graph(store)
    # flight routes to seat; last to the deferred report; pay to END; hotel to the join
    # pay, whose other source (seat) has not arrived.
    for thread, as_node in [
        ("plain", "flight"),
        ("held", "last"),
        ("end", "pay"),
        ("join", "hotel"),
    ]:
        await graph.ainvoke({}, thread_id=thread)
        await graph.update_state(thread, {}, as_node=as_node)
    listed = {info.thread_id: info.status for info in (await graph.list_threads()).threads}
    got = {thread: (await graph.get_state(thread)).status for thread in listed}
    assert got == {"plain": "running", "held": "running", "end": "idle", "join": "idle"}
    assert listed == {
        "plain": "unfinished",
        "held": "unfinished",
        "end": "completed",
        "join": "completed",
    }
    unfinished = await graph.list_threads(status="unfinished")
    assert sorted(info.thread_id for info in unfinished.threads) == ["held", "plain"]
    await graph.ainvoke(None, thread_id="plain")  # what the listing found goes on
    await graph.update_state("held", {"path": ["note"]})  # a plain edit changes nothing
    listed = {info.thread_id: info.status for info in (await graph.list_threads()).threads}
    assert listed == {
        "plain": "completed",
        "held": "unfinished",
        "end": "completed",
        "join": "completed",
    }


def _updated(routes: list[Any]) -> dict[str, Any]:
    return {"type": "state_updated", "values": {}, "node": "a", "routes": routes}


@pytest.mark.parametrize(
    ("routes", "status"),
    [
        ([], "completed"),
        (["b"], "unfinished"),
        ([{"send": "b", "payload": {}}], "unfinished"),
        ([{"defer": "b"}], "unfinished"),
        ([{"join": "j", "from": "a", "after": ["a", "b"]}], "completed"),
        ([{"join": "j", "from": "a", "after": ["a"]}], "unfinished"),
        ([{"join": "j", "from": "a", "after": ["a"], "defer": True}], "unfinished"),
        ("damaged", "completed"),
        ([{"join": "j", "after": "a"}], "completed"),
        ([{"join": "j", "from": ["a"], "after": [["a"]]}, 7], "completed"),
    ],
)
def test_status_after_an_update_as_node_follows_whether_its_routes_plan_a_task(
    routes: Any, status: str
) -> None:
    assert status_after("completed", _updated(routes)) == status


def test_status_after_a_plain_update_keeps_the_status_before() -> None:
    plain = {"type": "state_updated", "values": {"n": 1}}
    assert status_after("paused", plain) == "paused"
    assert status_after(None, plain) is None
