"""Node cache: answer repeated questions from stored results instead of running the node.

Run it with ``python examples/node_cache.py``.

A trip planner looks up the weather for each city of a trip in parallel (one ``Send`` task
per city). The lookup is slow and costly, so the ``forecast`` node has a cache policy: its
results are keyed on the city and kept for an hour, in a file that a second planner (a
restart, another process) shares. The script shows which lookups ran, how a hit is
recorded in the thread's history, the ``task_updates`` stream sending each city's forecast
as it arrives, and an entry expiring on the graph's clock.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    Command,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    Send,
    add,
    node,
)


class Trip(BaseState):
    cities: list[str] = Field(default_factory=list)
    city: str = ""
    forecasts: Annotated[list[str], add] = Field(default_factory=list)


lookups: list[str] = []


@node(cache=CachePolicy(key=lambda state: state.city, ttl=3600))
def forecast(state: Trip) -> dict:
    lookups.append(state.city)  # stands for a slow call to a weather service
    return {"forecasts": [f"{state.city}: sunny"]}


@node(goto=[forecast])
def plan(state: Trip) -> Command:
    return Command(goto=[Send(forecast, {"city": city}) for city in state.cities])


class Clock:
    """A clock the script moves by hand, so the hour passes at once."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def planner(cache_path: Path, clock: Clock) -> Graph[Trip]:
    graph = Graph(
        Trip,
        state_store=InMemoryStateStore(),
        cache_store=FilesystemStateStore(cache_path),
        clock=clock,
    )
    return graph.flow(START >> plan, forecast >> END)


def main(directory: Path) -> None:
    clock = Clock()
    cache_path = directory / "forecasts.jsonl"
    graph = planner(cache_path, clock)

    print("-- first trip: every city is looked up")
    result = graph.invoke({"cities": ["Oslo", "Rome"]}, thread_id="trip-1")
    print(result.state.forecasts, "looked up:", lookups)

    print("-- second trip, a new planner on the same cache file: only Paris is new")
    lookups.clear()
    again = planner(cache_path, clock)
    result = again.invoke({"cities": ["Rome", "Paris", "Oslo"]}, thread_id="trip-2")
    print(result.state.forecasts, "looked up:", lookups)
    for event in again.history_sync("trip-2").events:
        if event.type == "task_finished":
            mark = "cached" if event.data.get("cached") else "ran"
            print(f"   {event.data['update']['forecasts'][0]} ({mark})")

    print("-- task_updates: each forecast as its task finishes; the cached Oslo comes first")
    trip = {"cities": ["Lima", "Oslo"]}
    stream = again.stream(trip, stream_mode="task_updates", thread_id="trip-3")
    for event in stream:
        if event.mode == "task_updates":
            print(f"   step {event.step} {event.task_id}: {event.data}")

    print("-- an hour later the entries have expired")
    clock.now += 3600
    lookups.clear()
    result = again.invoke({"cities": ["Oslo"]}, thread_id="trip-4")
    print(result.state.forecasts, "looked up:", lookups)


with tempfile.TemporaryDirectory() as directory:
    main(Path(directory))
