"""A state that holds an int too long for ``repr`` still prints, and still shows in a
notebook: Python refuses to write an int of more than 4,300 digits (by default) in
decimal, and a ``repr`` that raised left the object with no text form at all."""

from __future__ import annotations

from nodestep import END, START, BaseState, Graph, node
from nodestep._display.text import short_repr


class Big(BaseState):
    n: int = 0


def test_an_int_past_the_conversion_limit_reads_as_its_length() -> None:
    assert short_repr(10**5000) == "<int of about 5,001 digits>"
    assert short_repr(-(10**5000)) == "<negative int of about 5,001 digits>"
    assert short_repr(12345) == "12345"


def test_a_state_and_a_result_holding_one_print_and_display() -> None:
    @node
    def step(state: Big) -> dict[str, int]:
        return {"n": state.n + 1}

    result = Graph(Big).flow(START >> step, step >> END).invoke({"n": 10**5000})
    assert repr(Big(n=10**5000)) == "Big(n=<int of about 5,001 digits>)"
    assert "state=Big(n=<int of about 5,001 digits>)" in repr(result)
    assert "&lt;int of about 5,001 digits&gt;" in result._repr_html_()
