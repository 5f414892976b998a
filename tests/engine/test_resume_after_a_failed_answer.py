"""An answer its node cannot take fails the run; a new answer replaces it.

Without this the thread was stuck: get_state listed the interrupt, resume= was refused
("no pending interrupt"), and invoke(None) gave the node the same answer again.
"""

from __future__ import annotations

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    Resume,
    ResumeError,
    StateUpdateError,
    interrupt,
    node,
)
from nodestep.store import StateStore
from store_helpers import reopened


class Approval(BaseState):
    request: str = ""
    answer: str = ""
    done: bool = False


@node
def ask(state: Approval) -> dict:
    return {"answer": interrupt(f"approve {state.request}?", id="approve")}


@node
def finish(state: Approval) -> dict:
    return {"done": True}


def approval(store: StateStore) -> Graph[Approval]:
    return Graph(Approval, state_store=store).flow(START >> ask, ask >> finish, finish >> END)


def test_a_new_answer_replaces_one_the_node_could_not_take(store: StateStore) -> None:
    assert approval(store).invoke({"request": "r-1"}, thread_id="t").status == "interrupted"
    with pytest.raises(StateUpdateError, match="Field 'answer' got an invalid value from 'ask'"):
        approval(store).invoke(None, thread_id="t", resume=Resume({"not": "text"}))
    # The same answer again fails again: it is stored with the run that gave it.
    with pytest.raises(StateUpdateError):
        approval(reopened(store)).invoke(None, thread_id="t")
    snapshot = approval(reopened(store)).get_state_sync("t")
    assert (snapshot.status, list(snapshot.interrupts)) == ("failed", ["ask:approve"])
    result = approval(reopened(store)).invoke(None, thread_id="t", resume=Resume("yes"))
    assert (result.status, result.state.answer, result.state.done) == ("completed", "yes", True)
    again = approval(reopened(store)).get_state_sync("t")
    assert (again.value.answer, again.interrupts) == ("yes", {})


def test_a_thread_that_failed_before_it_was_answered_takes_no_answer(store: StateStore) -> None:
    @node
    def broken(state: Approval) -> dict:
        raise RuntimeError("broken before asking")

    graph = Graph(Approval, state_store=store).flow(START >> broken, broken >> END)
    with pytest.raises(RuntimeError, match="broken before asking"):
        graph.invoke({}, thread_id="t")
    with pytest.raises(ResumeError, match="has no pending interrupt"):
        graph.invoke(None, thread_id="t", resume=Resume("yes"))
