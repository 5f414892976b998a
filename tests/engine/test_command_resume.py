"""``Command(resume=...)`` as input: the LangGraph-familiar way to answer a paused thread."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Resume,
    ResumeError,
    interrupt,
    node,
)


class Ticket(BaseState):
    decision: str = ""
    legal: str = ""
    finance: str = ""


def review_graph(calls: Counter[str]) -> Graph[Ticket]:
    @node
    def review(state: Ticket) -> dict:
        calls["review"] += 1
        return {"decision": interrupt({"ask": "approve?"}, id="approve")}

    return Graph(Ticket, state_store=InMemoryStateStore()).flow(START >> review, review >> END)


def test_command_resume_answers_the_only_pending_interrupt() -> None:
    graph = review_graph(Counter())
    assert graph.invoke({}, thread_id="t").status == "interrupted"
    result = graph.invoke(Command(resume="yes"), thread_id="t")
    assert (result.status, result.state.decision) == ("completed", "yes")


def test_command_resume_stores_the_same_history_as_resume() -> None:
    def answered(input: object, **options: object) -> list[dict]:
        graph = review_graph(Counter())
        graph.invoke({}, thread_id="t")
        graph.invoke(input, thread_id="t", **options)  # type: ignore[arg-type]
        events = graph.history_sync("t").events
        return [{"type": e.type, **{k: v for k, v in e.data.items() if k != "run"}} for e in events]

    assert answered(Command(resume="yes")) == answered(None, resume=Resume("yes"))


def test_command_resume_takes_a_resume_with_answers_by_key() -> None:
    @node
    def legal(state: Ticket) -> dict:
        return {"legal": interrupt("legal?", id="sign")}

    @node
    def finance(state: Ticket) -> dict:
        return {"finance": interrupt("finance?", id="sign")}

    @node(goto=[legal, finance])
    def split(state: Ticket) -> Command:
        return Command(goto=[legal, finance])

    graph = Graph(Ticket, state_store=InMemoryStateStore()).flow(
        START >> split, legal >> END, finance >> END
    )
    paused = graph.invoke({}, thread_id="t")
    assert sorted(paused.interrupts) == ["finance:sign", "legal:sign"]
    answers = Resume(answers={"legal:sign": "ok", "finance:sign": "fine"})
    state = graph.invoke(Command(resume=answers), thread_id="t").state
    assert (state.legal, state.finance) == ("ok", "fine")


def test_command_resume_works_in_streams_and_async_calls() -> None:
    graph = review_graph(Counter())
    graph.invoke({}, thread_id="a")
    events = list(graph.stream(Command(resume="yes"), thread_id="a", stream_mode="updates"))
    assert events[-1].mode == "final"
    assert events[-1].data.state.decision == "yes"
    graph.invoke({}, thread_id="b")
    result = asyncio.run(graph.ainvoke(Command(resume="no"), thread_id="b"))
    assert result.state.decision == "no"


def test_command_resume_of_a_thread_that_is_not_paused_is_refused() -> None:
    graph = review_graph(Counter())
    graph.invoke({}, thread_id="t")
    graph.invoke(Command(resume="yes"), thread_id="t")
    with pytest.raises(ResumeError, match="no pending interrupt"):
        graph.invoke(Command(resume="again"), thread_id="t")


@pytest.mark.parametrize(
    "command",
    [
        Command(update={"decision": "x"}, resume="yes"),
        Command(goto=END, resume="yes"),
        Command(update={"decision": "x"}),
        Command(),
    ],
)
def test_a_command_input_other_than_resume_is_refused_with_the_fix(command: Command) -> None:
    calls: Counter[str] = Counter()
    graph = review_graph(calls)
    graph.invoke({}, thread_id="t")
    with pytest.raises(GraphConfigError, match=r"Command\(resume=answer\).*update_state"):
        graph.invoke(command, thread_id="t")
    assert calls["review"] == 1
    assert graph.get_state_sync("t").value.decision == ""


def test_command_resume_together_with_resume_option_is_refused() -> None:
    graph = review_graph(Counter())
    graph.invoke({}, thread_id="t")
    with pytest.raises(GraphConfigError, match="give the answers once"):
        graph.invoke(Command(resume="a"), thread_id="t", resume=Resume("b"))


def test_a_node_returning_command_resume_fails_the_run_with_the_fix() -> None:
    @node
    def confused(state: Ticket) -> Command:
        return Command(resume="yes")

    graph = Graph(Ticket).flow(START >> confused, confused >> END)
    with pytest.raises(TypeError, match=r"passed by the caller, as invoke\(Command\(resume"):
        graph.invoke({})


def test_command_repr_shows_the_answer() -> None:
    assert repr(Command(resume="yes")) == "Command(update=None, goto=None, resume='yes')"
    assert "resume" not in repr(Command(update={"a": 1}))
