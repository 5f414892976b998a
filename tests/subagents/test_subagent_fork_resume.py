"""A branch forked from a parent paused on its sub-agents' interrupts is answered once.

The branch runs its sub-agents on threads of its own, which start afresh and pause on the
same interrupts (their keys are derived); the answers the branch's resume gives reach
them there, as they reach the paused sub-agents on the thread the pause was made on. The
main branch keeps its own pause and its own answers.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from nodestep import (
    END,
    START,
    AgentTask,
    BaseState,
    Graph,
    InMemoryStateStore,
    NodeContext,
    Resume,
    add,
    interrupt,
    node,
)


class Research(BaseState):
    topic: str = ""
    summary: str = ""


class Report(BaseState):
    topics: list[str] = Field(default_factory=list)
    notes: Annotated[list[str], add] = Field(default_factory=list)


@node
def approve(state: Research) -> dict:
    return {"summary": f"{state.topic}: {interrupt({'publish': state.topic}, id='ok')}"}


approver = Graph(Research, name="approver").flow(START >> approve, approve >> END)


@node
async def publish(state: Report, ctx: NodeContext) -> dict:
    handles = await ctx.spawn([AgentTask(approver, input={"topic": t}) for t in state.topics])
    return {"notes": [r.state.summary for r in await ctx.gather(handles)]}  # type: ignore[union-attr]


KEYS = ["publish/approver#0/approve:ok", "publish/approver#1/approve:ok"]


def test_a_fork_of_a_paused_parent_takes_its_answers_in_one_resume() -> None:
    store = InMemoryStateStore()
    desk = Graph(Report, state_store=store).flow(START >> publish, publish >> END)

    async def main() -> None:
        paused = await desk.ainvoke({"topics": ["solar", "wind"]}, thread_id="d")
        assert sorted(paused.interrupts) == KEYS
        branch = await desk.fork("d", from_=paused.checkpoint_id, name="retry")

        answers = dict(zip(KEYS, ["no", "later"], strict=True))
        done = await desk.ainvoke(
            None, thread_id="d", branch_id=branch.id, resume=Resume(answers=answers)
        )
        assert done.status == "completed", done.interrupts
        assert done.state.notes == ["solar: no", "wind: later"]

        # The main branch is still paused, and its own answers finish it.
        assert (await desk.get_state("d")).status == "paused"
        answers = dict(zip(KEYS, ["yes", "yes"], strict=True))
        main_done = await desk.ainvoke(None, thread_id="d", resume=Resume(answers=answers))
        assert main_done.state.notes == ["solar: yes", "wind: yes"]
        branch_state = await desk.get_state("d", branch_id=branch.id)
        assert branch_state.value.notes == ["solar: no", "wind: later"]

    asyncio.run(main())
