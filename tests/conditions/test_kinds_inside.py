"""Kinds inside values: membership, list and dict equality, and a context given as a dict.

Python's ``True == 1`` holds, and so do ``True in [1]`` and ``[True] == [1]``; the
condition language compares values of one kind only, item by item as well as at the top.
A declared context type is checked on the values read when the run's context is not an
instance of it (a dict), so a declaration never makes routing less strict.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from nodestep import END, START, BaseState, ConditionError, Graph, GraphExecutionError, node, when
from nodestep._conditions.condition import Condition
from nodestep._conditions.env import NO_CONTEXT, Env


class Flags(BaseModel):
    vip: bool = False


class S(BaseState):
    meta: dict[str, Any] = Field(default_factory=dict)
    codes: list[int] = Field(default_factory=list)
    maybe_codes: list[int] | None = None
    nested: list[list[bool]] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    status: str = ""


class Ctx(BaseModel):
    urgent: bool = False
    tier: str = "free"
    ids: list[int] = Field(default_factory=list)
    flags: Flags | None = None


def holds(
    text: str, state: S | None = None, context: Any = NO_CONTEXT, context_type: Any = None
) -> bool:
    return Condition(text).compile(S, context=context_type).holds(Env(state or S(), context))


@pytest.mark.parametrize(
    ("text", "values", "message"),
    [
        ("meta.flag in [1, 2]", {"flag": True}, "'in' looks for true/false True in [1, 2]"),
        ("meta.flag not in [1, 2]", {"flag": True}, "'not in' looks for true/false True in"),
        ("1 in meta.flags", {"flags": [True]}, "'in' looks for a number 1 in [True], whose"),
        ("meta.n in [true]", {"n": 1}, "'in' looks for a number 1 in [True], whose items"),
        ("0 in meta.d", {"d": {False: "no"}}, "'in' looks for a number 0 in {False: 'no'}"),
        ("meta.flags == [1]", {"flags": [True]}, "'==' compares true/false True with a number"),
        ("meta.flags != [1]", {"flags": [True]}, "(inside [True] and [1])"),
        ("meta.a == meta.b", {"a": {"k": True}, "b": {"k": 1}}, "true/false True with a number"),
        ("meta.a == meta.b", {"a": {1: "x"}, "b": {True: "x"}}, "a number 1 with true/false"),
        ("meta.a == meta.b", {"a": [[0]], "b": [[False]]}, "a number 0 with true/false False"),
        ("[1] in meta.ls", {"ls": [[True]]}, "'in' compares a number 1 with true/false True"),
    ],
)
def test_python_true_equals_one_never_decides_membership_or_list_equality(
    text: str, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(GraphExecutionError, match="could not be evaluated") as caught:
        holds(text, S(meta=values))
    assert message in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("meta.flag in [true, 1]", {"flag": True}, True),
        ("meta.n in [true, 1]", {"n": 1}, True),
        ("meta.n in [true, 2]", {"n": 1}, False),  # an item of its kind: a fair miss
        ("meta.n in [1, 'a']", {"n": 2}, False),
        ("meta.s in [1, 'a']", {"s": "a"}, True),
        ("meta.n in [null]", {"n": 1}, False),  # null compares with any kind, as in ==
        ("meta.n in meta.none", {"n": 1, "none": []}, False),
        ("meta.n in meta.l", {"n": 1.0, "l": [False, 1]}, True),
        ("'k' in meta", {"k": 0}, True),
        ("'x' in meta", {"k": 0}, False),
        ("meta.flags == [true]", {"flags": [True]}, True),
        ("meta.flags == [true, false]", {"flags": [True]}, False),  # lengths differ
        ("meta.flags != [2, true]", {"flags": [1, True]}, True),  # 1 != 2 decides
        ("meta.a == meta.b", {"a": {"k": [1]}, "b": {"k": [1.0]}}, True),
        ("meta.a == meta.b", {"a": {"k": 1}, "b": {"j": 1}}, False),
        ("meta.a == meta.b", {"a": (1, 2), "b": [1, 2]}, True),  # a tuple is a list here
        ("[1] in meta.ls", {"ls": [[2], [1]]}, True),
        ("null in meta.ls", {"ls": [1]}, False),
    ],
)
def test_membership_and_equality_of_one_kind_evaluate_as_a_reader_expects(
    text: str, values: dict[str, Any], expected: bool
) -> None:
    assert holds(text, S(meta=values)) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[true] == [1]", "'==' compares a list (items: true/false) with a list (items: a"),
        ("codes == [true]", "a list (items: a number) with a list (items: true/false), which"),
        ("[true] != codes", "'!=' compares a list (items: true/false) with a list (items: a"),
        (
            "[1] in nested",
            "'in' looks for a list (items: a number) where every item is a list "
            "(items: true/false), so it never holds",
        ),
        ("[[1]] == [[true]]", "compares a list (items: a list (items: a number)) with a list"),
    ],
)
def test_lists_whose_items_are_never_equal_are_refused_when_the_flow_compiles(
    text: str, message: str
) -> None:
    with pytest.raises(ConditionError) as caught:
        Condition(text).compile(S)
    assert message in str(caught.value), str(caught.value)
    assert "compare with a list of the same item type" in str(caught.value)


@pytest.mark.parametrize(
    "text",
    ["codes == []", "codes == [1, 2.5]", "codes == [1, null]", "maybe_codes == [1]",
     "[true] in nested", "tags == [status]", "codes == meta.any"],
)  # fmt: skip
def test_lists_whose_items_may_be_equal_are_not_refused(text: str) -> None:
    Condition(text).compile(S)


def test_typed_lists_compare_and_look_up_as_before() -> None:
    state = S(codes=[1, 2], tags=["a"], status="a", nested=[[True]])
    assert holds("codes == [1, 2]", state) is True
    assert holds("codes != [1, 2.0]", state) is False
    assert holds("2 in codes and status in tags", state) is True
    assert holds("[true] in nested", state) is True
    assert holds("status in ['b', 'c']", state) is False


@pytest.mark.parametrize(
    ("text", "context", "message"),
    [
        ("urgent", {"urgent": "no"}, "'urgent' is declared true/false by the context type Ctx"),
        ("urgent", {"urgent": [0]}, "but the context (a dict) holds [0]"),
        ("not urgent", {"urgent": 0}, "'urgent' is declared true/false"),
        ("tier == 'gold'", {"tier": 3}, "'tier' is declared a string by the context type Ctx"),
        ("ids == [1]", {"ids": [True]}, "'ids' is declared a list (items: a number) by"),
        ("1 in ids", {"ids": [True]}, "holds [True]"),
        ("flags.vip", {"flags": {"vip": "yes"}}, "'flags.vip' is declared true/false"),
    ],
)
def test_a_dict_context_is_checked_against_the_declared_type_on_the_values_read(
    text: str, context: dict[str, Any], message: str
) -> None:
    with pytest.raises(GraphExecutionError, match="could not be evaluated") as caught:
        holds(text, context=context, context_type=Ctx)
    assert message in str(caught.value), str(caught.value)
    assert "Pass the context as a Ctx object" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "context", "expected"),
    [
        ("urgent", {"urgent": True}, True),
        ("urgent", {}, False),  # a missing key is null, which counts as false
        ("tier == 'gold'", {"tier": "gold"}, True),
        ("ids == [1]", {"ids": [1]}, True),
        ("flags.vip", {"flags": None}, False),
        ("flags.vip", {"flags": Flags(vip=True)}, True),
        ("urgent", Ctx(urgent=True), True),
    ],
)
def test_a_dict_context_whose_values_fit_evaluates_as_the_declared_model(
    text: str, context: Any, expected: bool
) -> None:
    assert holds(text, context=context, context_type=Ctx) is expected


def test_a_flow_with_a_declared_context_refuses_a_dict_value_python_would_take_as_true() -> None:
    taken: list[str] = []

    @node
    def start(state: S) -> dict[str, Any]:
        return {}

    @node
    def urgent(state: S) -> dict[str, Any]:
        taken.append("urgent")
        return {}

    graph = Graph(S).flow(
        START >> start,
        start >> when("urgent", urgent, otherwise=END, context=Ctx),
        urgent >> END,
    )
    graph.invoke({}, context={"urgent": True})
    assert taken == ["urgent"]
    with pytest.raises(GraphExecutionError, match="'urgent' is declared true/false"):
        graph.invoke({}, context={"urgent": "no"})
    assert taken == ["urgent"]
