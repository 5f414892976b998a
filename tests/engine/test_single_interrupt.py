"""``result.interrupt``: the one pending interrupt, without spelling its ``"task:id"`` key."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    InMemoryStateStore,
    Resume,
    ResumeError,
    add,
    interrupt,
    node,
)


class Desk(BaseState):
    answers: Annotated[list[str], add] = Field(default_factory=list)


@node
def legal(state: Desk) -> dict:
    return {"answers": [str(interrupt("legal ok?", id="ok"))]}


@node
def security(state: Desk) -> dict:
    return {"answers": [str(interrupt("security ok?", id="ok"))]}


@node
def noop(state: Desk) -> dict:
    return {}


@node(goto=[legal, security])
def both(state: Desk) -> Command:
    return Command(goto=[legal, security])


def test_a_result_with_one_pending_interrupt_offers_it() -> None:
    graph = Graph(Desk, state_store=InMemoryStateStore()).flow(START >> legal, legal >> END)
    paused = graph.invoke({}, thread_id="t")
    pending = paused.interrupt
    assert (pending.key, pending.node, pending.payload) == ("legal:ok", "legal", "legal ok?")
    assert pending is paused.interrupts["legal:ok"]
    done = graph.invoke(None, thread_id="t", resume=Resume("yes"))
    assert done.state.answers == ["yes"]


def test_a_completed_result_has_no_interrupt_to_offer() -> None:
    done = Graph(Desk).flow(START >> noop, noop >> END).invoke({})
    assert done.status == "completed"
    with pytest.raises(ResumeError, match=r"^No interrupt is pending: the run completed") as err:
        done.interrupt  # noqa: B018
    assert err.value.pending == ()


def test_a_result_with_several_pending_interrupts_names_their_keys() -> None:
    graph = Graph(Desk, state_store=InMemoryStateStore()).flow(
        START >> both, legal >> END, security >> END
    )
    paused = graph.invoke({}, thread_id="t")
    with pytest.raises(
        ResumeError,
        match=r"^2 interrupts are pending \('legal:ok', 'security:ok'\), so there is no single",
    ) as caught:
        paused.interrupt  # noqa: B018
    assert caught.value.pending == ("legal:ok", "security:ok")


def test_a_breakpoint_stop_has_no_interrupt_to_offer() -> None:
    graph = Graph(Desk, state_store=InMemoryStateStore(), interrupt_before=[legal]).flow(
        START >> legal, legal >> END
    )
    stopped = graph.invoke({}, thread_id="t")
    assert stopped.status == "interrupted" and stopped.interrupts == {}
    with pytest.raises(ResumeError, match="or a breakpoint stopped it"):
        stopped.interrupt  # noqa: B018


def test_an_interrupt_event_of_a_stream_offers_its_one_interrupt_too() -> None:
    graph = Graph(Desk, state_store=InMemoryStateStore()).flow(START >> legal, legal >> END)
    (last,) = list(graph.stream({}, thread_id="t", stream_mode=[]))
    assert last.mode == "interrupt" and last.data.interrupt.key == "legal:ok"
