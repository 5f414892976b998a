"""The interrupts a snapshot shows are those ``resume=`` takes answers for, on every store.

A paused superstep waits for all its interrupts. A resume that stored its answers closes
them, even when its run is cut short; a failure on an answer opens them again, except those
of tasks that finished since, which no answer reaches. ``get_state`` (cached or loaded),
``get_state(at=)`` and ``state_history`` agree, and ``resume=`` follows them.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    Resume,
    ResumeError,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore


class Launch(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


def launch_graph(store: StateStore) -> Graph[Launch]:
    """legal and security pause in one superstep; security fails on the answer 'bad'."""

    @node
    async def legal(state: Launch) -> dict[str, Any]:
        return {"log": [f"legal {interrupt('legal?', id='ok')}"]}

    @node
    async def security(state: Launch) -> dict[str, Any]:
        answer = interrupt("security?", id="ok")
        if answer == "bad":
            raise ValueError("security cannot take 'bad'")
        return {"log": [f"security {answer}"]}

    @node(goto=[legal, security])
    def submit(state: Launch) -> Command:
        return Command(goto=[legal, security])

    return Graph(Launch, state_store=store).flow(START >> submit, legal >> END, security >> END)


def failed_on_security(store: StateStore) -> Graph[Launch]:
    graph = launch_graph(store)
    graph.invoke({}, thread_id="t")
    with pytest.raises(ValueError, match="cannot take 'bad'"):
        answers = {"legal:ok": "yes", "security:ok": "bad"}
        graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    return graph


def test_a_failed_answer_reopens_only_the_interrupts_of_tasks_still_to_run(
    store: StateStore,
) -> None:
    graph = failed_on_security(store)
    last = graph.history_sync("t").events[-1]
    for snapshot in (
        graph.get_state_sync("t"),
        graph.get_state_sync("t", at=last.id),
        graph.state_history_sync("t")[-1].snapshot,
    ):
        assert (snapshot.status, snapshot.next) == ("failed", ("security",))
        assert list(snapshot.interrupts) == ["security:ok"]

    result = graph.invoke(None, thread_id="t", resume=Resume("fine"))
    assert sorted(result.state.log) == ["legal yes", "security fine"]


def test_an_answer_to_an_interrupt_whose_task_finished_is_refused_saying_so(
    store: StateStore,
) -> None:
    graph = failed_on_security(store)
    answers = {"legal:ok": "again", "security:ok": "fine"}
    with pytest.raises(ResumeError) as refused:
        graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    assert str(refused.value) == (
        "Resume answers 'legal:ok', which is not pending on thread 't'. Pending: "
        "'security:ok'. 'legal:ok' no longer waits: its task finished in this superstep, so "
        "no answer reaches it; leave it out."
    )
    assert refused.value.pending == ("security:ok",)


class Review(BaseState):
    verdict: str = ""


def review_graph(store: StateStore) -> Graph[Review]:
    """review pauses; it fails on the answer 'bad'."""

    @node
    def review(state: Review) -> dict[str, Any]:
        answer = interrupt("ok?", id="verdict")
        if answer == "bad":
            raise ValueError("review cannot take 'bad'")
        return {"verdict": answer}

    return Graph(Review, state_store=store).flow(START >> review, review >> END)


def test_a_failed_task_that_update_state_stood_in_for_has_no_open_interrupt(
    store: StateStore,
) -> None:
    graph = review_graph(store)
    graph.invoke({}, thread_id="t")
    with pytest.raises(ValueError, match="cannot take 'bad'"):
        graph.invoke(None, thread_id="t", resume=Resume("bad"))
    graph.update_state_sync("t", {"verdict": "by hand"}, as_node="review")

    snapshot = graph.get_state_sync("t")
    assert (snapshot.status, snapshot.next, snapshot.interrupts) == ("failed", (), {})
    with pytest.raises(ResumeError, match="has no pending interrupt"):
        graph.invoke(None, thread_id="t", resume=Resume("yes"))
    assert graph.invoke(None, thread_id="t").state.verdict == "by hand"


@pytest.mark.anyio
async def test_a_resume_cut_short_leaves_its_answers_and_no_open_interrupt(
    store: StateStore,
) -> None:
    started = anyio.Event()

    @node
    async def review(state: Review) -> dict[str, Any]:
        answer = interrupt("ok?", id="verdict")
        if answer == "wait":
            started.set()
            await anyio.sleep_forever()
        return {"verdict": answer}

    graph = Graph(Review, state_store=store).flow(START >> review, review >> END)
    await graph.ainvoke({}, thread_id="t")
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: graph.ainvoke(None, thread_id="t", resume=Resume("wait")))
        await started.wait()
        group.cancel_scope.cancel()

    last = (await graph.history("t")).events[-1]
    assert (last.type, last.data["reason"]) == ("run_stopped", "cancelled")
    for snapshot in (await graph.get_state("t"), await graph.get_state("t", at=last.id)):
        assert (snapshot.status, snapshot.next, snapshot.interrupts) == ("running", ("review",), {})
    with pytest.raises(ResumeError, match=r"\('review:verdict'\) were already answered"):
        await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))


def test_an_answer_keyed_by_the_interrupt_id_names_the_key_to_use(store: StateStore) -> None:
    graph = review_graph(store)
    graph.invoke({}, thread_id="t")
    with pytest.raises(ResumeError) as refused:
        graph.invoke(None, thread_id="t", resume=Resume(answers={"verdict": "yes"}))
    assert str(refused.value) == (
        "Resume answers 'verdict', which is not pending on thread 't'. Pending: "
        "'review:verdict'. Answers are keyed '<task_id>:<id>', as in result.interrupts: use "
        "'review:verdict'."
    )
    assert graph.get_state_sync("t").status == "paused"


def signing_desk(store: StateStore) -> Graph[Launch]:
    """The subgraph 'legal' pauses in sign and stamp; sign fails on the answer 'bad'."""

    @node
    async def sign(state: Launch) -> dict[str, Any]:
        answer = interrupt("sign?", id="ok")
        if answer == "bad":
            raise ValueError("sign cannot take 'bad'")
        return {"log": [f"sign {answer}"]}

    @node
    async def stamp(state: Launch) -> dict[str, Any]:
        return {"log": [f"stamp {interrupt('stamp?', id='ok')}"]}

    @node(goto=[sign, stamp])
    def fan(state: Launch) -> Command:
        return Command(goto=[sign, stamp])

    legal = Graph(Launch, name="legal").flow(START >> fan, sign >> END, stamp >> END)
    return Graph(Launch, name="desk", state_store=store).flow(START >> legal, legal >> END)


def test_a_subgraph_that_failed_on_an_answer_takes_the_answers_its_parent_shows(
    store: StateStore,
) -> None:
    graph = signing_desk(store)
    graph.invoke({}, thread_id="t")
    keys = ["legal/sign:ok", "legal/stamp:ok"]
    with pytest.raises(ValueError, match="cannot take 'bad'"):
        answers = {"legal/sign:ok": "bad", "legal/stamp:ok": "yes"}
        graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    snapshot = graph.get_state_sync("t")
    assert (snapshot.status, list(snapshot.interrupts)) == ("failed", keys)

    answers = {key: "fine" for key in snapshot.interrupts}
    result = graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    assert sorted(result.state.log) == ["sign fine", "stamp yes"]
