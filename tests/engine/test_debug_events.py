"""The ``"debug"`` stream's ``routes`` event: every route as JSON data, ``Send`` payloads too."""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from nodestep import END, START, BaseState, Command, Graph, InMemoryStateStore, Send, add, node

pytestmark = pytest.mark.anyio


class Place(BaseModel):
    city: str
    day: dt.date


class Trip(BaseState):
    place: Place | None = None
    stops: tuple[int, ...] = ()
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def visit(state: Trip) -> dict[str, Any]:
    assert state.place is not None
    return {"log": [state.place.city]}


@node(goto=[visit, "wrap"])
def plan(state: Trip) -> Command:
    return Command(
        goto=[
            Send(visit, {"place": Place(city="Oslo", day=dt.date(2024, 5, 1)), "stops": (1, 2)}),
            Send(visit, {"place": {"city": "Rome", "day": "2024-05-02"}}),
            "wrap",
        ]
    )


@node
def wrap(state: Trip) -> None:
    return None


def _graph(store: InMemoryStateStore | None) -> Graph[Trip]:
    return Graph(Trip, state_store=store).flow(START >> plan, visit >> END, wrap >> END)


async def _routes(graph: Graph[Trip], **kwargs: Any) -> list[dict[str, Any]]:
    return [
        e.data["routes"]
        async for e in graph.astream({}, stream_mode="debug", **kwargs)
        if e.mode == "debug" and e.data["type"] == "routes"
    ]


EXPECTED = {
    "plan": [
        {
            "send": "visit",
            "payload": {"place": {"city": "Oslo", "day": "2024-05-01"}, "stops": [1, 2]},
        },
        {"send": "visit", "payload": {"place": {"city": "Rome", "day": "2024-05-02"}}},
        "wrap",
    ]
}


@pytest.mark.parametrize("with_store", [False, True], ids=["no store", "store"])
async def test_debug_routes_show_send_payloads_as_json_data(with_store: bool):
    store = InMemoryStateStore() if with_store else None
    routes = await _routes(_graph(store), **({"thread_id": "t"} if with_store else {}))
    assert routes[0] == EXPECTED
    assert json.loads(json.dumps(routes)) == routes
    assert routes[1] == {"visit": [], "visit[1]": [], "wrap": []}


async def test_changing_a_debug_route_payload_changes_no_run():
    store = InMemoryStateStore()
    graph = _graph(store)
    async for event in graph.astream({}, stream_mode="debug", thread_id="t"):
        if event.mode == "debug" and event.data["type"] == "routes" and event.step == 0:
            for route in event.data["routes"]["plan"][:2]:
                route["payload"]["place"]["city"] = "Nowhere"
    assert sorted((await graph.get_state("t")).value.log) == ["Oslo", "Rome"]


class Handle:
    def __repr__(self) -> str:
        return "<Handle 7>"


class Job(BaseState):
    tool: Any = None


async def test_debug_routes_show_a_payload_value_without_json_form_by_its_repr():
    @node
    def use(state: Job) -> None:
        return None

    @node(goto=[use])
    def hand_out(state: Job) -> Send:
        return Send(use, {"tool": Handle()})

    graph = Graph(Job).flow(START >> hand_out, use >> END)
    routes = [
        e.data["routes"]
        async for e in graph.astream({}, stream_mode="debug")
        if e.mode == "debug" and e.data["type"] == "routes"
    ]
    assert routes[0] == {"hand_out": [{"send": "use", "payload": {"tool": "<Handle 7>"}}]}
