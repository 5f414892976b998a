"""The graph the command line tests run: two drafts written in parallel, then a review
that asks a person for a verdict (an interrupt)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Command, Graph, Send, add, interrupt, node


class Review(BaseState):
    topic: str = ""
    drafts: Annotated[list[str], add] = Field(default_factory=list)
    verdict: str = ""


# async: the two drafts are written in the order they start, so histories compare equal.
@node
async def write(state: Review) -> dict[str, list[str]]:
    return {"drafts": [f"a post on {state.topic}"]}


@node(goto=[write])
def plan(state: Review) -> Command:
    return Command(goto=[Send(write, {"topic": t}) for t in ("tea", "cake")])


@node
def review(state: Review) -> dict[str, str]:
    return {"verdict": interrupt({"drafts": state.drafts}, id="verdict")}


graph = Graph(Review, name="blog").flow(START >> plan, write >> review, review >> END)


class Count(BaseState):
    n: int = 0


@node(goto=["inc", END])
def inc(state: Count) -> Command:
    # 70 supersteps: past the 50 records after which the store writes another checkpoint,
    # so prune has history to drop.
    return Command(update={"n": state.n + 1}, goto="inc" if state.n + 1 < 70 else END)


counter = Graph(Count, name="counter", max_steps=100).flow(START >> inc)


class Job(BaseState):
    tries: int = 0


@node
def flaky(state: Job) -> dict[str, int]:
    raise ConnectionError("the service did not answer")


job = Graph(Job, name="job").flow(START >> flaky, flaky >> END)
