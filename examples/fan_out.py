"""Fan-out and join: one task per item with ``Send``, then one node that combines them.

Run it with ``python examples/fan_out.py``.

``plan`` sends one ``review`` task per chapter. The ``review`` tasks run concurrently in
the same superstep, each with its chapter laid over its own copy of the state. They finish
in a different order than they were sent (the long chapters take longer), but their
writes merge in scheduling order, so the result is the same on every run. All of them
route to ``combine``, which runs once, in the next superstep.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Command, Graph, NodeContext, Send, add, node

CHAPTERS = {
    "Leaves": "Tea starts as the leaves of one plant, Camellia sinensis, picked by hand "
    "in the hills where it grows best, two leaves and a bud at a time.",
    "Harvest": "Picked leaves wilt.",
    "Brewing": "Water just off the boil, three minutes, no more, then pour it out.",
}


class Book(BaseState):
    chapter: str = ""  # set per task by the Send payload; never kept in the state
    reviews: Annotated[list[str], add] = Field(default_factory=list)
    word_counts: Annotated[list[int], add] = Field(default_factory=list)
    summary: str = ""


@node(goto=["review"])
def plan(state: Book) -> Command:
    return Command(goto=[Send(review, {"chapter": name}) for name in CHAPTERS])


@node
async def review(state: Book, ctx: NodeContext) -> dict:
    words = len(CHAPTERS[state.chapter].split())
    await asyncio.sleep(words / 200)  # longer chapters take longer
    print(f"   {ctx.task_id} finished ({state.chapter})")
    return {
        "reviews": [f"{state.chapter}: {words} words ({ctx.task_id})"],
        "word_counts": [words],
    }


@node
def combine(state: Book) -> dict:
    return {"summary": f"{len(state.reviews)} chapters, {sum(state.word_counts)} words"}


graph = Graph(Book, name="book").flow(
    START >> plan,
    review >> combine,
    combine >> END,
)


def main() -> None:
    print("-- tasks, superstep by superstep")
    result = None
    for event in graph.stream({}, stream_mode="updates"):
        if event.mode == "updates":
            reviews = event.data and event.data.get("reviews")
            print(event.step, event.task_id, reviews or event.data)
        else:
            result = event.data

    assert result is not None
    print("-- result")
    for line in result.state.reviews:
        print(line)
    print("summary:", result.state.summary)
    print("chapter field after the run:", repr(result.state.chapter))


if __name__ == "__main__":
    main()
