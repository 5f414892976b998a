"""The condition language: what parses, what the load-time check refuses, how it evaluates."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from nodestep import BaseState, ConditionError, ContextNotProvidedError, GraphExecutionError, add
from nodestep._conditions.condition import Condition, Source, failed
from nodestep._conditions.env import NO_CONTEXT, Env


class User(BaseModel):
    tier: str = "free"
    email: str | None = None


class S(BaseState):
    status: str = ""
    failed: bool = False
    retry_count: int = 0
    priority: Literal["low", "high"] = "low"
    user: User = User()
    maybe: User | None = None
    tags: Annotated[list[str], add] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None


class Ctx(BaseModel):
    region: str = "eu"


def holds(text: str, state: S | None = None, **env: Any) -> bool:
    compiled = Condition(text).compile(
        S, context=env.pop("context_type", None), functions=env.pop("functions", None)
    )
    return compiled.holds(
        Env(state or S(), env.get("context", NO_CONTEXT), env.get("output"), env.get("error"))
    )


def check_error(text: str, **kwargs: Any) -> ConditionError:
    with pytest.raises(ConditionError) as caught:
        Condition(text).compile(S, **kwargs)
    return caught.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status == 'complete'", True),
        ("status != 'complete'", False),
        ("retry_count < 3", True),
        ("retry_count >= 2 and retry_count <= 2", True),
        ("failed and (retry_count < 3 or priority == 'high')", False),
        ("not failed or status == 'x'", True),
        ("user.tier == 'enterprise'", True),
        ("'vip' in tags", True),
        ("'gold' not in tags", True),
        ("status in ['open', 'complete']", True),
        ("$len(tags) == 2", True),
        ("$exists(user.email)", False),
        ("$exists(maybe)", False),
        ("maybe.tier == 'x'", False),
        ("$lower(status) == 'complete'", True),
        ("$upper(user.tier) == 'ENTERPRISE'", True),
        ("score > 1", False),
        ("meta.any.depth == null", True),
        ("true and not false", True),
        ("retry_count == -2 or retry_count == 2.0", True),
        ('status == "complete"', True),
    ],
)
def test_conditions_evaluate_as_a_reader_expects(text: str, expected: bool) -> None:
    state = S(status="complete", retry_count=2, user=User(tier="enterprise"), tags=["vip", "x"])
    assert holds(text, state) is expected


def test_and_binds_tighter_than_or_and_not_tighter_than_and() -> None:
    state = S(failed=False, retry_count=5, priority="high")
    assert holds("failed and retry_count < 3 or priority == 'high'", state) is True
    assert holds("failed and (retry_count < 3 or priority == 'high')", state) is False
    assert holds("not failed and priority == 'low'", state) is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("failed || priority == 'high'", True),
        ("!failed && retry_count > 3", True),
        ("failed && retry_count < 3 || priority == 'high'", True),
        ("failed && (retry_count < 3 || priority == 'high')", False),
        ("!(priority == 'high')", False),
        ("!!failed", False),
        ("!failed == true", True),
        ("priority != 'low' && !$exists(maybe)", True),
    ],
)
def test_and_and_or_and_not_have_their_c_spellings(text: str, expected: bool) -> None:
    state = S(failed=False, retry_count=5, priority="high")
    assert holds(text, state) is expected


def test_bang_binds_tighter_than_a_comparison_and_not_looser() -> None:
    state = S(failed=True)
    # '!failed == false' is '(not failed) == false';
    # 'not failed == false' is 'not (failed == false)'.
    assert holds("!failed == false", state) is True
    assert holds("not failed == false", state) is True
    assert holds("!failed == true", state) is False
    assert holds("not failed == true", state) is False
    with pytest.raises(ConditionError, match=r"'!' \(which negates only the operand after it"):
        Condition("!status == 'x'").compile(S)


def test_a_bare_name_is_a_state_field_before_a_context_field() -> None:
    class Shadow(BaseModel):
        status: str = "from context"

    compiled = Condition("status == 'from state'").compile(S, context=Shadow)
    assert compiled.holds(Env(S(status="from state"), Shadow()))
    explicit = Condition("context.status == 'from context'").compile(S, context=Shadow)
    assert explicit.holds(Env(S(), Shadow()))


def test_context_names_resolve_through_the_declared_context_type() -> None:
    assert holds("region == 'eu'", context_type=Ctx, context=Ctx()) is True
    assert holds("context.region == 'us'", context=Ctx(region="us")) is True
    assert holds("context.region == 'us'", context={"region": "us"}) is True


def test_reading_the_context_of_a_run_without_one_names_the_fix() -> None:
    with pytest.raises(ContextNotProvidedError, match=r"Pass context=\.\.\."):
        holds("context.region == 'eu'")


def test_output_reads_the_nodes_update_and_null_for_fields_it_did_not_write() -> None:
    assert holds("output.status == 'done'", output={"status": "done"}) is True
    assert holds("$exists(output.retry_count)", output={"status": "done"}) is False


def test_registered_functions_are_called_by_reference_with_the_state_or_with_arguments() -> None:
    def big(state: S) -> bool:
        return state.retry_count > 10

    def over(value: int, limit: int) -> bool:
        return value > limit

    functions = {"rules.big": big, "rules.over": over}
    assert holds("rules.big", S(retry_count=11), functions=functions) is True
    assert holds("rules.over(retry_count, 3)", S(retry_count=4), functions=functions) is True


def test_is_error_matches_by_class_name_and_base_classes() -> None:
    class Slow(TimeoutError):
        pass

    assert holds("$is_error('TimeoutError')", error=Slow()) is True
    assert holds("$is_error('KeyError', 'OSError')", error=Slow()) is True  # TimeoutError < OSError
    assert holds("$is_error('KeyError')", error=Slow()) is False
    assert holds("$is_error()", error=ValueError()) is True
    assert holds("$is_error()") is False
    assert Condition("$is_error() or status == 'x'").on_error is True
    assert Condition("status == 'x'").on_error is False


def test_failed_builds_the_is_error_condition_from_classes() -> None:
    assert failed(TimeoutError, KeyError).text == "$is_error('TimeoutError', 'KeyError')"
    with pytest.raises(ValueError, match=r"failed\(\.\.\.\) takes exception classes"):
        failed("TimeoutError")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("status = 'x'", "compare with '=='", 8),
        ("status == 'x' & failed", "unexpected character '&'", 15),
        ("status ! failed", "unexpected '!' after a complete condition", 8),
        ("(status == 'x'", "expected ')'", 15),
        ("status == 'x' failed", "after a complete condition", 15),
        ("a < b < c", "comparisons do not chain", 7),
        ("status == True", "write 'true', not 'True'", 11),
        ("'open", "has no closing '", 1),
        ("$len", "needs parentheses", 5),
        ("", "expected a value", 1),
        ("status == 'a\\q'", "unknown escape", 13),
    ],
)
def test_syntax_errors_say_what_and_where(text: str, message: str, column: int) -> None:
    with pytest.raises(ConditionError) as caught:
        Condition(text)
    error = caught.value
    assert message in str(error)
    assert (error.line, error.column) == (1, column)
    assert error.text == text and error.file is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope == 1", "unknown name 'nope'"),
        ("user.rank == 1", "'user' has no field 'rank' (its fields: email, tier)"),
        ("status.length == 1", "'status' is a string, which has no fields"),
        ("status == 3", "compares a string with a number"),
        ("priority == 'medium' or retry_count == '3'", "compares a number with a string"),
        ("retry_count < 'a'", "orders two numbers or two strings"),
        ("failed < true", "orders two numbers or two strings"),
        ("status and failed", "'and' needs true/false, but this is a string"),
        ("not retry_count", "'not' needs true/false"),
        ("retry_count", "a condition must be true or false"),
        ("'a' in retry_count", "needs a list, string or dict on its right"),
        ("rules.check(status)", "'rules.check' is not a registered function"),
        ("$nope(status)", "unknown built-in '$nope'"),
        ("$len(retry_count) > 0", "$len(...) takes a string, list or dict"),
        ("$exists('x')", "$exists(...) takes a name"),
        ("$is_error(status)", "takes exception class names as strings"),
        ("$lower(status, status) == 'a'", "takes one argument"),
        ("retry_count in 'abc'", "'in' on a string looks for a string, but this is a number"),
        ("retry_count in ['1', '2']", "looks for a number where every item is a string, so it"),
        ("1 in tags", "looks for a number where every item is a string, so it never holds"),
        ("1 not in tags", "where every item is a string, so it always holds"),
        ("true in ['a', status]", "looks for true/false where every item is a string"),
    ],
)
def test_the_load_time_check_refuses_what_cannot_work(text: str, message: str) -> None:
    error = check_error(text)
    assert message in str(error), str(error)


def test_a_registered_function_is_checked_for_its_arguments() -> None:
    def two(a: int, b: int) -> bool:
        return a > b

    error = check_error("rules.two(retry_count)", functions={"rules.two": two})
    assert "cannot take 1 argument(s)" in str(error)


def test_errors_point_into_the_manifest_file() -> None:
    condition_text = "status == 'x' and\n  nope > 1"
    with pytest.raises(ConditionError) as caught:
        Condition(condition_text, Source("specs/g.yaml", 12, 11)).compile(S)
    error = caught.value
    assert (error.file, error.line, error.column) == ("specs/g.yaml", 13, 3)
    assert str(error).startswith("specs/g.yaml:13:3: condition")


def test_a_type_mismatch_through_an_untyped_context_fails_at_run_time_naming_the_condition() -> (
    None
):
    with pytest.raises(GraphExecutionError, match=r"Condition 'context\.n < 3' could not be"):
        holds("context.n < 3", context={"n": "many"})


@pytest.mark.parametrize(
    "text",
    ["status in ['a', 1]", "retry_count in [1, 'a']", "meta.n in tags", "score in [1, 2.5]",
     "user.email in ['a']", "'k' in meta", "null in tags"],
)  # fmt: skip
def test_membership_that_may_hold_is_not_refused(text: str) -> None:
    Condition(text).compile(S)


@pytest.mark.parametrize(
    ("text", "values", "message"),
    [
        ("meta.mode", {"mode": "off"}, "the condition needs true/false, got 'off'"),
        ("not meta.count", {"count": 0}, "'not' needs true/false, got 0"),
        ("meta.a and failed", {"a": [1]}, "'and' needs true/false, got [1]"),
        ("failed or meta.a", {"a": 1.5}, "'or' needs true/false, got 1.5"),
        ("meta.ok == 1", {"ok": True}, "'==' compares true/false True with a number 1"),
        ("meta.n != 'x'", {"n": 3}, "'!=' compares a number 3 with a string 'x', which are"),
        ("meta.a == meta.b", {"a": "1", "b": 1}, "compares a string '1' with a number 1"),
    ],
)
def test_a_value_of_unknown_type_is_checked_when_read(
    text: str, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(GraphExecutionError, match="could not be evaluated") as caught:
        holds(text, S(meta=values))
    assert message in str(caught.value)
    assert "declare the type so the condition is checked then" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("meta.mode", {"mode": True}, True),
        ("not meta.mode", {}, True),  # a missing key is null, which counts as false
        ("meta.n == 3", {"n": 3.0}, True),
        ("meta.n == null", {"n": 0}, False),
        ("meta.s != 'x'", {"s": "y"}, True),
        ("meta.a == meta.b", {"a": [1], "b": [1]}, True),
    ],
)
def test_a_value_of_unknown_type_that_fits_evaluates_as_a_typed_one(
    text: str, values: dict[str, Any], expected: bool
) -> None:
    assert holds(text, S(meta=values)) is expected


def test_an_undeclared_context_and_an_unannotated_function_are_checked_when_read() -> None:
    with pytest.raises(GraphExecutionError, match="compares a number 3 with a string 'high'"):
        holds("context.level == 'high'", context={"level": 3})
    assert holds("context.level == 'high'", context={"level": "high"}) is True

    def tier(state: S):  # type: ignore[no-untyped-def]
        return state.user.tier

    with pytest.raises(GraphExecutionError, match="needs true/false, got 'free'"):
        holds("rules.tier", functions={"rules.tier": tier})


def test_conditions_never_read_attributes_of_arbitrary_objects() -> None:
    class Secret:
        password = "hunter2"

    with pytest.raises(GraphExecutionError, match="conditions read fields of dicts"):
        holds("context.password == 'hunter2'", context=Secret())
    # Fields of a model only: a method or dunder is no field, so it reads as null.
    assert holds("context.model_dump == null", context=Ctx()) is True


def test_ordering_with_null_is_false_rather_than_an_error() -> None:
    assert holds("score < 1") is False
    assert holds("score >= 1") is False
    assert holds("score < 1", S(score=0.5)) is True
