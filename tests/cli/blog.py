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


@node
def write(state: Review) -> dict[str, list[str]]:
    return {"drafts": [f"a post on {state.topic}"]}


@node(goto=[write])
def plan(state: Review) -> Command:
    return Command(goto=[Send(write, {"topic": t}) for t in ("tea", "cake")])


@node
def review(state: Review) -> dict[str, str]:
    return {"verdict": interrupt({"drafts": state.drafts}, id="verdict")}


graph = Graph(Review, name="blog").flow(START >> plan, write >> review, review >> END)
