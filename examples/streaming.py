"""Streaming: follow a run superstep by superstep, in each stream mode.

Run it with ``python examples/streaming.py``.

The graph drafts a short answer, counts its words and, if the answer is too long, trims
it. The script streams the same run in each mode (``updates``, ``values``, ``custom``,
``debug``, several at once, none), then with ``astream`` in async code, and last closes a
stream early and continues the run from the state store.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    NodeContext,
    StreamEvent,
    add,
    node,
    when,
)


class Answer(BaseState):
    question: str = ""
    text: str = ""
    words: int = 0
    notes: Annotated[list[str], add] = Field(default_factory=list)


@node
def draft(state: Answer, ctx: NodeContext) -> dict:
    ctx.emit({"stage": "drafting", "question": state.question})
    text = "Green tea is tea whose leaves are not oxidised, so it stays light and grassy."
    ctx.emit({"stage": "drafted", "characters": len(text)})
    return {"text": text}


@node
def count(state: Answer) -> dict:
    return {"words": len(state.text.split())}


@node
def trim(state: Answer) -> dict:
    short = " ".join(state.text.split()[:8]) + "..."
    return {"text": short, "words": 8, "notes": ["trimmed to 8 words"]}


def too_long(state: Answer) -> bool:
    return state.words > 10


graph = Graph(Answer, name="answer").flow(
    START >> draft,
    draft >> count,
    count >> when(too_long, trim, otherwise=END),
    trim >> END,
)

QUESTION = {"question": "What is green tea?"}


def show(event: StreamEvent) -> None:
    """Print an event without its run id (random) or its thread id (generated)."""
    if event.mode == "final":
        print(f"  step {event.step} final: {event.data.state}")
    elif event.node is None:
        print(f"  step {event.step} {event.mode}: {event.data}")
    else:
        print(f"  step {event.step} {event.mode} [{event.task_id}]: {event.data}")


def each_mode() -> None:
    for mode in ["updates", "values", "custom", "debug", ["custom", "updates"], []]:
        print(f"stream_mode={mode!r}")
        for event in graph.stream(QUESTION, stream_mode=mode):
            show(event)


async def in_async_code() -> None:
    print("astream, stream_mode='updates'")
    async for event in graph.astream(QUESTION, stream_mode="updates"):
        show(event)


def close_early() -> None:
    print("closing a stream early, then continuing the thread")
    stored = Graph(Answer, name="answer", state_store=InMemoryStateStore()).flow(
        START >> draft,
        draft >> count,
        count >> when(too_long, trim, otherwise=END),
        trim >> END,
    )
    events = stored.stream(QUESTION, stream_mode="updates", thread_id="answer-1")
    for event in events:
        show(event)
        if event.task_id == "count":
            break
    events.close()  # stops the run; the store records where it stopped

    snapshot = asyncio.run(stored.get_state("answer-1"))
    print(f"  thread is {snapshot.status}, next: {list(snapshot.next)}")
    result = stored.invoke(None, thread_id="answer-1")
    print(f"  continued: {result.status}, {result.state.notes}")


def main() -> None:
    each_mode()
    asyncio.run(in_async_code())
    close_early()


if __name__ == "__main__":
    main()
