"""Calling interrupt() and Resume: a missing id and empty answers are refused with the fix."""

from __future__ import annotations

import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, Resume, interrupt, node


class S(BaseState):
    answer: str = ""


def test_interrupt_without_an_id_says_why_ids_are_needed_and_how_to_call_it():
    @node
    def ask(state: S):
        return {"answer": interrupt("Approve?")}  # type: ignore[call-arg]

    graph = Graph(S, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    with pytest.raises(
        TypeError,
        match=r"^interrupt\(\) needs id=: the id names the question, so that the answer given on "
        r"resume reaches it when the node runs again from the top \(its key is "
        r"'<task_id>:<id>'\)\. Call it as interrupt\(payload, id='approve'\), with an id unique "
        r"within one run of the node\.$",
    ):
        graph.invoke({}, thread_id="t")


def test_interrupt_without_an_id_is_refused_outside_a_node_too():
    with pytest.raises(TypeError, match=r"^interrupt\(\) needs id=: "):
        interrupt("Approve?")  # type: ignore[call-arg]


def test_resume_with_empty_answers_is_refused():
    with pytest.raises(
        TypeError,
        match=r"^Resume\(answers=\{\}\) answers nothing\. answers= maps the key of every pending "
        r"interrupt \('<task_id>:<id>', as in result\.interrupts\) to its answer, e\.g\. "
        r"Resume\(answers=\{'legal:sign_off': 'yes'\}\); for the only pending interrupt, "
        r"Resume\(value\) is enough\.$",
    ):
        Resume(answers={})


def test_resume_with_answers_keeps_them():
    assert Resume(answers={"ask:ok": "yes"}).answers == {"ask:ok": "yes"}
