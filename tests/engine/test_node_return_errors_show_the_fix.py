"""A node that returns something no node returns gets a ``TypeError`` that says what it
returned and, for the usual slips, how to write it: a list of ``Send``s, a coroutine from
a plain ``def``, a generator, or a new model instance."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

from nodestep import END, START, BaseState, Graph, Send, node

COMMON = (
    "A node returns a dict update, the state it changed in place, Command(update=..., "
    "goto=...), Send(node, payload), END or None."
)


class Count(BaseState):
    n: int = 0


@node
def target(state: Count) -> None:
    return None


async def _later() -> dict[str, int]:
    return {"n": 1}


def _sends(state: Count) -> Any:
    return [Send(target, {"n": 1}), Send(target, {"n": 2})]


def _coroutine(state: Count) -> Any:
    return _later()


def _generator(state: Count) -> Any:
    yield {"n": 1}


def _model(state: Count) -> Any:
    return Count(n=3)


@pytest.mark.parametrize(
    ("fn", "returned", "fix"),
    [
        (_sends, "a list", "To send several, return Command(goto=[Send(...), ...]) and "
         "declare the targets in @node(goto=[...])."),
        (_coroutine, "a coroutine", "The node is a plain def that returned a coroutine: make "
         "it an async def that awaits the call."),
        (_generator, "a generator", "A node runs once and returns its update; to report "
         "progress while it runs, call ctx.emit(...) on its NodeContext."),
        (_model, "a Count", "A Count made in the node is not the state it got: return a dict "
         "of the fields to change, e.g. model.model_dump(exclude_unset=True)."),
    ],
)  # fmt: skip
def test_a_wrong_return_says_what_it_was_and_the_fix(
    fn: Callable[[Count], Any], returned: str, fix: str
) -> None:
    made = node(fn, name="work", goto=[target])
    graph = Graph(Count).flow(START >> made, target >> END)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left unawaited would warn
        with pytest.raises(TypeError) as caught:
            graph.invoke({})
    assert str(caught.value) == f"Node 'work' returned {returned}. {COMMON} {fix}"


def test_other_wrong_returns_keep_the_common_message() -> None:
    made = node(lambda state: {"n"}, name="work")
    with pytest.raises(TypeError) as caught:
        Graph(Count).flow(START >> made, made >> END).invoke({})
    assert str(caught.value) == f"Node 'work' returned a set. {COMMON}"
