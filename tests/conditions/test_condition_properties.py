"""Properties of the condition language, on random input.

* On random well-typed conditions, the compiled evaluator agrees with a reference
  interpreter written here, on the test's own expression tree: the tree is printed with
  only the parentheses precedence needs (and some redundant ones), so the parser's
  precedence is tested too. Each ``and``, ``or`` and ``not`` is printed in either spelling
  (``&&``, ``||``, and ``!``, which binds tighter than a comparison).
* Random text never makes parsing or checking raise anything but ``ConditionError``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import BaseState, ConditionError, GraphExecutionError
from nodestep._conditions.condition import Condition
from nodestep._conditions.env import Env


class S(BaseState):
    a: int = 0
    b: int = 0
    s: str = ""
    t: str = ""
    flag: bool = False
    items: list[str] = Field(default_factory=list)
    maybe: int | None = None


# -- a small typed expression tree, its printing and its reference meaning --------------

NUM_OPS = ["==", "!=", "<", "<=", ">", ">="]
PREC = {"or": 1, "and": 2, "not": 3}
COMPARISON, OPERAND = 4, 5
SPELLINGS = {"and": ["and", "&&"], "or": ["or", "||"]}

numbers = st.one_of(
    st.sampled_from(["a", "b"]).map(lambda n: ("field", n)),
    st.integers(-5, 5).map(lambda v: ("lit", v)),
    st.just(("len",)),
)
strings = st.one_of(
    st.sampled_from(["s", "t"]).map(lambda n: ("field", n)),
    st.sampled_from(["", "x", "y", "it's"]).map(lambda v: ("lit", v)),
)
atoms = st.one_of(
    st.tuples(st.just("cmp"), st.sampled_from(NUM_OPS), numbers, numbers),
    st.tuples(st.just("cmp"), st.sampled_from(["==", "!=", "<", ">="]), strings, strings),
    st.tuples(st.just("in"), st.booleans(), strings),
    st.tuples(st.just("inlist"), strings, st.lists(st.sampled_from(["x", "y", ""]), max_size=3)),
    st.just(("flag",)),
    st.booleans().map(lambda v: ("bool", v)),
    st.tuples(st.just("maybe"), st.sampled_from(["<", ">=", "=="]), st.integers(-2, 2)),
    st.just(("exists",)),
)
trees = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.tuples(st.just("not"), inner),
        st.tuples(st.sampled_from(["and", "or"]), inner, inner),
    ),
    max_leaves=12,
)


def show_value(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(v)


def show_operand(x: tuple[Any, ...]) -> str:
    if x[0] == "field":
        return str(x[1])
    if x[0] == "len":
        return "$len(items)"
    return show_value(x[1])


def show(tree: tuple[Any, ...], parent: int, redundant: st.DataObject) -> str:
    kind = tree[0]
    if kind in ("and", "or"):
        word = redundant.draw(st.sampled_from(SPELLINGS[kind]))
        left, right = show(tree[1], PREC[kind], redundant), show(tree[2], PREC[kind], redundant)
        text, prec = f"{left} {word} {right}", PREC[kind]
    elif kind == "not" and redundant.draw(st.booleans()):
        text, prec = f"!{show(tree[1], OPERAND, redundant)}", OPERAND
    elif kind == "not":
        text, prec = f"not {show(tree[1], PREC['not'], redundant)}", PREC["not"]
    else:
        text = show_atom(tree)
        prec = OPERAND if tree[0] in ("flag", "bool", "exists") else COMPARISON
    wrap = prec < parent or redundant.draw(st.integers(0, 9)) == 0
    return f"({text})" if wrap else text


def show_atom(tree: tuple[Any, ...]) -> str:
    kind = tree[0]
    if kind == "cmp":
        return f"{show_operand(tree[2])} {tree[1]} {show_operand(tree[3])}"
    if kind == "in":
        return f"{show_operand(tree[2])} {'in' if tree[1] else 'not in'} s"
    if kind == "inlist":
        return f"{show_operand(tree[1])} in [{', '.join(show_value(v) for v in tree[2])}]"
    if kind == "flag":
        return "flag"
    if kind == "bool":
        return "true" if tree[1] else "false"
    if kind == "maybe":
        return f"maybe {tree[1]} {tree[2]}"
    return "$exists(maybe)"


def value_of(x: tuple[Any, ...], state: S) -> Any:
    if x[0] == "field":
        return getattr(state, x[1])
    if x[0] == "len":
        return len(state.items)
    return x[1]


def compare(op: str, left: Any, right: Any) -> bool:
    if op in ("==", "!="):
        return (left == right) is (op == "==")
    if left is None or right is None:
        return False  # the documented rule: an ordering with null is false
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def meaning(tree: tuple[Any, ...], state: S) -> bool:
    kind = tree[0]
    if kind == "and":
        return meaning(tree[1], state) and meaning(tree[2], state)
    if kind == "or":
        return meaning(tree[1], state) or meaning(tree[2], state)
    if kind == "not":
        return not meaning(tree[1], state)
    if kind == "cmp":
        return compare(tree[1], value_of(tree[2], state), value_of(tree[3], state))
    if kind == "in":
        return (value_of(tree[2], state) in state.s) is tree[1]
    if kind == "inlist":
        return value_of(tree[1], state) in tree[2]
    if kind == "flag":
        return state.flag
    if kind == "bool":
        return bool(tree[1])
    if kind == "maybe":
        return compare(tree[1], state.maybe, tree[2])
    return state.maybe is not None


states = st.builds(
    S,
    a=st.integers(-3, 3),
    b=st.integers(-3, 3),
    s=st.sampled_from(["", "x", "xy", "it's"]),
    t=st.sampled_from(["", "y", "x"]),
    flag=st.booleans(),
    items=st.lists(st.sampled_from(["x", "y"]), max_size=4),
    maybe=st.one_of(st.none(), st.integers(-2, 2)),
)


@pytest.mark.slow
@settings(max_examples=300)
@given(tree=trees, state=states, data=st.data())
def test_the_evaluator_agrees_with_the_reference_meaning(
    tree: tuple[Any, ...], state: S, data: st.DataObject
) -> None:
    text = show(tree, 0, data)
    compiled = Condition(text).compile(S)
    assert compiled.holds(Env(state)) is meaning(tree, state), text


WORDS = [
    "and",
    "or",
    "not",
    "&&",
    "||",
    "!",
    "in",
    "true",
    "null",
    "items",
    "maybe",
    "$len(",
    "$is_error(",
]
ALPHABET = st.sampled_from([*"ab s.()[],$'\"\\=!<>-0123456789\n\t", *WORDS])


@pytest.mark.slow
@settings(max_examples=500)
@given(text=st.one_of(st.text(max_size=40), st.lists(ALPHABET, max_size=25).map("".join)))
def test_random_text_only_ever_raises_the_documented_error(text: str) -> None:
    try:
        Condition(text).compile(S)
    except ConditionError as error:
        assert error.text == text
        assert 0 <= error.offset <= len(text)
        assert error.line >= 1 and error.column >= 1


def test_deep_nesting_is_refused_with_the_documented_error_not_a_recursion_error() -> None:
    for text in (
        "(" * 5000 + "flag" + ")" * 5000,
        "not " * 5000 + "flag",
        "!" * 5000 + "flag",
        "[" * 3000,
    ):
        try:
            Condition(text)
        except ConditionError as error:
            assert "nest" in str(error) or "expected" in str(error)
        else:
            raise AssertionError(f"{text[:20]}... parsed")


@pytest.mark.parametrize(
    "text",
    [
        "f(" * 1000 + "flag" + ")" * 1000,
        "$len(" * 1000 + "items" + ")" * 1000,
        "f([" * 500 + "flag" + "])" * 500,
        "rules.f(not (" * 400 + "flag" + "))" * 400,
    ],
)
def test_nested_calls_count_toward_the_nesting_limit(text: str) -> None:
    with pytest.raises(ConditionError, match="nests deeper than 64 levels"):
        Condition(text)


def test_calls_nested_within_the_limit_still_parse() -> None:
    text = "f(" * 30 + "flag" + ")" * 30
    assert Condition(text).text == text


@pytest.mark.parametrize("digits", ["9" * 5000, "1" * 101, "1." + "5" * 200, "1e" + "9" * 200])
def test_a_numeric_literal_longer_than_the_bound_is_a_condition_error(digits: str) -> None:
    with pytest.raises(ConditionError, match="number of more than 100 characters") as caught:
        Condition(f"a < {digits}")
    assert caught.value.offset == 4


def test_a_numeric_literal_at_the_bound_parses() -> None:
    condition = Condition("a < " + "9" * 100)
    condition.compile(S)
    assert condition.tree.right.value == int("9" * 100)  # type: ignore[union-attr]


# -- a value known only when read is held to the rules the load-time check applies -------


class Typed(BaseState):
    """A field per kind, whose conditions the load-time check sees, and an untyped dict."""

    t_bool: bool = False
    t_number: int = 0
    t_str: str = ""
    d: dict[str, Any] = Field(default_factory=dict)


def _kind(value: Any) -> str:
    return {bool: "bool", int: "number", str: "str"}[type(value)]


plain_values = st.one_of(st.booleans(), st.integers(-2, 2), st.sampled_from(["", "a", "b"]))
UNTYPED_FORMS = ["{x}", "not {x}", "{x} and true", "false or {x}", "{x} == {lit}", "{x} != {lit}"]


@settings(max_examples=300)
@given(value=plain_values, literal=plain_values, form=st.sampled_from(UNTYPED_FORMS))
def test_an_untyped_value_fails_at_run_time_exactly_where_its_type_fails_at_load(
    value: Any, literal: Any, form: str
) -> None:
    typed_text = form.format(x=f"t_{_kind(value)}", lit=show_value(literal).lower())
    untyped_text = form.format(x="d.x", lit=show_value(literal).lower())
    state = Typed(**{f"t_{_kind(value)}": value, "d": {"x": value}})
    untyped = Condition(untyped_text).compile(Typed)
    try:
        typed = Condition(typed_text).compile(Typed)
    except ConditionError:
        with pytest.raises(GraphExecutionError, match="could not be evaluated"):
            untyped.holds(Env(state))
    else:
        assert untyped.holds(Env(state)) is typed.holds(Env(state)), untyped_text
