"""A fork at a resume's events: the stored answers have answered the interrupts.

A resume's ``run_started`` stores the answers, so the snapshot there (and of a fork there)
is running with them, not paused: it shows no open interrupt, ``invoke(None)`` goes on
with the stored answers, and ``resume=`` is refused with a message that says where to fork
to answer again. Every store agrees.
"""

from __future__ import annotations

from typing import Annotated, Any

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


class Review(BaseState):
    verdict: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


def review_graph(store: StateStore) -> Graph[Review]:
    """review pauses for a verdict; the verdict is its update."""

    @node
    def review(state: Review) -> dict[str, Any]:
        return {"verdict": interrupt("ok?", id="verdict")}

    return Graph(Review, state_store=store).flow(START >> review, review >> END)


def resumed_thread(store: StateStore) -> tuple[Graph[Review], str]:
    """Pause thread 't', resume it with 'yes'; return the graph and the resume's event id."""
    graph = review_graph(store)
    graph.invoke({}, thread_id="t")
    graph.invoke(None, thread_id="t", resume=Resume("yes"))
    started = [e for e in graph.history_sync("t") if e.type == "run_started"]
    assert started[-1].data["answers"] == {"review:verdict": "yes"}
    return graph, started[-1].id


def test_the_state_at_a_resumes_run_started_has_no_open_interrupt(store: StateStore) -> None:
    graph, at = resumed_thread(store)
    snapshot = graph.get_state_sync("t", at=at)
    assert (snapshot.status, snapshot.next, snapshot.interrupts) == ("running", ("review",), {})


def test_a_fork_at_a_resumes_run_started_continues_with_the_stored_answers(
    store: StateStore,
) -> None:
    graph, at = resumed_thread(store)
    branch = graph.fork_sync("t", from_=at, name="again")
    snapshot = graph.get_state_sync("t", branch_id=branch.id)
    assert (snapshot.status, snapshot.interrupts) == ("running", {})

    result = graph.invoke(None, thread_id="t", branch_id=branch.id)
    assert (result.status, result.state.verdict) == ("completed", "yes")


def test_resume_on_a_fork_at_a_resumes_run_started_says_where_to_answer_again(
    store: StateStore,
) -> None:
    graph, at = resumed_thread(store)
    branch = graph.fork_sync("t", from_=at, name="again")
    with pytest.raises(ResumeError) as refused:
        graph.invoke(None, thread_id="t", branch_id=branch.id, resume=Resume("no"))
    message = str(refused.value)
    assert "thread 't' (branch 'again') ('review:verdict') were already answered" in message
    assert "invoke(None)" in message and "run_paused" in message and "last_pause()" in message

    pause = graph.state_history_sync("t").last_pause()
    assert pause is not None and list(pause.snapshot.interrupts) == ["review:verdict"]
    retry = graph.fork_sync("t", from_=pause.event.id, name="retry")
    result = graph.invoke(None, thread_id="t", branch_id=retry.id, resume=Resume("no"))
    assert result.state.verdict == "no"


def test_state_history_shows_interrupts_only_while_they_wait_for_answers(
    store: StateStore,
) -> None:
    graph, _ = resumed_thread(store)
    shown = [
        (s.event.type, s.snapshot.status, list(s.snapshot.interrupts))
        for s in graph.state_history_sync("t")
    ]
    assert shown == [
        ("checkpoint", "idle", []),
        ("run_started", "running", []),
        ("run_paused", "paused", ["review:verdict"]),
        ("run_started", "running", []),
        ("superstep_completed", "idle", []),
        ("run_completed", "idle", []),
    ]


class Launch(BaseState):
    sign_offs: Annotated[list[str], add] = Field(default_factory=list)


def launch_graph(store: StateStore) -> Graph[Launch]:
    """submit fans out to legal and security, which both pause in one superstep."""

    @node
    async def legal(state: Launch) -> dict[str, Any]:
        return {"sign_offs": [f"legal: {interrupt('legal?', id='ok')}"]}

    @node
    async def security(state: Launch) -> dict[str, Any]:
        return {"sign_offs": [f"security: {interrupt('security?', id='ok')}"]}

    @node(goto=[legal, security])
    def submit(state: Launch) -> Command:
        return Command(goto=[legal, security])

    return Graph(Launch, state_store=store).flow(START >> submit, legal >> END, security >> END)


def test_a_fork_between_the_tasks_of_a_resumed_superstep_runs_the_rest_with_its_answer(
    store: StateStore,
) -> None:
    graph = launch_graph(store)
    graph.invoke({}, thread_id="t")
    answers = {"legal:ok": "yes", "security:ok": "later"}
    graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    first = next(e for e in graph.history_sync("t") if e.type == "task_finished")
    snapshot = graph.get_state_sync("t", at=first.id)
    assert (snapshot.status, len(snapshot.next), snapshot.interrupts) == ("running", 1, {})

    branch = graph.fork_sync("t", from_=first.id)
    with pytest.raises(ResumeError, match="were already answered"):
        graph.invoke(None, thread_id="t", branch_id=branch.id, resume=Resume(answers=answers))
    result = graph.invoke(None, thread_id="t", branch_id=branch.id)
    assert sorted(result.state.sign_offs) == ["legal: yes", "security: later"]


def test_a_thread_that_failed_on_its_answer_shows_the_interrupts_resume_takes(
    store: StateStore,
) -> None:
    @node
    def review(state: Review) -> dict[str, Any]:
        answer = interrupt("ok?", id="verdict")
        if answer != "yes":
            raise ValueError(f"cannot take {answer!r}")
        return {"verdict": answer}

    graph = Graph(Review, state_store=store).flow(START >> review, review >> END)
    graph.invoke({}, thread_id="t")
    with pytest.raises(ValueError, match="cannot take 'no'"):
        graph.invoke(None, thread_id="t", resume=Resume("no"))
    snapshot = graph.get_state_sync("t")
    assert (snapshot.status, list(snapshot.interrupts)) == ("failed", ["review:verdict"])
    result = graph.invoke(None, thread_id="t", resume=Resume("yes"))
    assert result.state.verdict == "yes"


def test_last_pause_of_a_branch_forked_at_a_pause_is_its_first_checkpoint(
    store: StateStore,
) -> None:
    graph, _ = resumed_thread(store)
    pause = graph.state_history_sync("t").last_pause()
    assert pause is not None
    first = graph.fork_sync("t", from_=pause.event.id, name="first")
    graph.invoke(None, thread_id="t", branch_id=first.id, resume=Resume("no"))

    again = graph.state_history_sync("t", branch_id=first.id).last_pause()
    assert again is not None
    assert (again.event.type, again.event.sequence) == ("checkpoint", pause.event.sequence + 1)
    second = graph.fork_sync("t", from_=again.event.id, branch_id=first.id, name="second")
    result = graph.invoke(None, thread_id="t", branch_id=second.id, resume=Resume("maybe"))
    assert result.state.verdict == "maybe"


def test_last_pause_of_a_branch_forked_where_nothing_waits_is_none(store: StateStore) -> None:
    graph, at = resumed_thread(store)
    branch = graph.fork_sync("t", from_=at, name="running")
    assert graph.state_history_sync("t", branch_id=branch.id).last_pause() is None


def nested_desk(store: StateStore) -> Graph[Review]:
    """desk runs the subgraph review, which runs legal, whose sign pauses."""

    @node
    def sign(state: Review) -> dict[str, Any]:
        return {"verdict": interrupt("sign?", id="approve")}

    legal = Graph(Review, name="legal").flow(START >> sign, sign >> END)
    review = Graph(Review, name="review").flow(START >> legal, legal >> END)
    return Graph(Review, name="desk", state_store=store).flow(START >> review, review >> END)


def test_subgraph_state_at_a_resumes_run_started_is_running_with_the_answers(
    store: StateStore,
) -> None:
    graph = nested_desk(store)
    graph.invoke({}, thread_id="t")
    graph.invoke(None, thread_id="t", resume=Resume("Ada"))
    started = [e for e in graph.history_sync("t") if e.type == "run_started"][-1]
    branch = graph.fork_sync("t", from_=started.id, name="again")

    for path in ("review", "review/legal"):
        for child in (
            graph.subgraph_state_sync("t", path, at=started.id),
            graph.subgraph_state_sync("t", path, branch_id=branch.id),
        ):
            assert (child.status, child.interrupts) == ("running", {}), path
    result = graph.invoke(None, thread_id="t", branch_id=branch.id)
    assert result.state.verdict == "Ada"
