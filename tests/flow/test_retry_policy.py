"""RetryPolicy: its settings are checked, its waits grow and are jittered deterministically."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep import GraphConfigError, NodeTimeoutError, RetryPolicy, StateUpdateError


def test_waits_grow_by_the_multiplier_up_to_the_longest_wait() -> None:
    policy = RetryPolicy(backoff=1.0, multiplier=3.0, max_backoff=5.0, jitter=0)
    assert [policy.delay(n, "run:task") for n in (1, 2, 3, 4)] == [1.0, 3.0, 5.0, 5.0]


@pytest.mark.slow
@given(
    attempt=st.integers(1, 30),
    key=st.text(max_size=20),
    jitter=st.floats(0, 1),
    seed=st.integers(-(2**31), 2**31),
)
def test_a_jittered_wait_stays_within_its_fraction_and_repeats_for_the_same_key(
    attempt: int, key: str, jitter: float, seed: int
) -> None:
    policy = RetryPolicy(backoff=2.0, multiplier=2.0, max_backoff=60.0, jitter=jitter, seed=seed)
    base = min(60.0, 2.0 * 2.0 ** (attempt - 1))
    wait = policy.delay(attempt, key)
    assert base * (1 - jitter) - 1e-5 <= wait <= base * (1 + jitter) + 1e-5
    assert policy.delay(attempt, key) == wait


def test_jitter_spreads_the_waits_of_different_runs() -> None:
    policy = RetryPolicy(backoff=10.0, jitter=0.5)
    waits = {policy.delay(1, f"run-{n}:task") for n in range(20)}
    assert len(waits) == 20


def test_retry_on_takes_a_class_a_tuple_or_a_function() -> None:
    assert RetryPolicy(retry_on=ConnectionError).retries(ConnectionResetError())
    assert not RetryPolicy(retry_on=ConnectionError).retries(ValueError())
    assert RetryPolicy(retry_on=(KeyError, ValueError)).retries(KeyError())
    only_503 = RetryPolicy(retry_on=lambda error: "503" in str(error))
    assert only_503.retries(RuntimeError("HTTP 503"))
    assert not only_503.retries(RuntimeError("HTTP 400"))


def test_retry_on_may_name_the_error_class_or_a_base_of_it() -> None:
    # A manifest names errors it cannot import.
    by_name = RetryPolicy(retry_on=("ConnectionError", "TimeoutError"))
    assert by_name.retries(ConnectionResetError())
    assert by_name.retries(NodeTimeoutError("n", 1.0))
    assert not by_name.retries(ValueError())
    assert RetryPolicy(retry_on=(KeyError, "ValueError")).retries(KeyError())


def test_nodestep_errors_about_the_graph_are_never_retried_but_node_timeouts_are() -> None:
    policy = RetryPolicy(retry_on=Exception)
    assert not policy.retries(StateUpdateError("bad update"))
    assert policy.retries(NodeTimeoutError("n", 1.0))


def test_a_keyboard_interrupt_is_never_retried() -> None:
    assert not RetryPolicy(retry_on=BaseException).retries(KeyboardInterrupt())


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"attempts": 0}, "attempts"),
        ({"attempts": True}, "attempts"),
        ({"attempts": 2.5}, "attempts"),
        ({"backoff": -1}, "backoff"),
        ({"backoff": float("nan")}, "backoff"),
        ({"max_backoff": float("inf")}, "max_backoff"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
        ({"deadline": 0}, "deadline"),
        ({"retry_on": "not a class name"}, "retry_on"),
        ({"retry_on": (ValueError, 3)}, "retry_on"),
        ({"seed": "x"}, "seed"),
        ({"backoff": 10**400}, "backoff"),
        ({"max_backoff": 10**400}, "max_backoff"),
        ({"multiplier": 10**400}, "multiplier"),
        ({"deadline": 10**400}, "deadline"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_by_name(settings: dict, named: str) -> None:
    with pytest.raises(GraphConfigError, match=rf"RetryPolicy\({named}="):
        RetryPolicy(**settings)


def test_a_number_too_large_for_a_float_is_refused_naming_the_setting_and_the_limit() -> None:
    with pytest.raises(GraphConfigError) as caught:
        RetryPolicy(backoff=10**400)
    message = str(caught.value)
    assert message.startswith("RetryPolicy(backoff=...) takes a finite number of seconds")
    assert "an integer larger than a float holds (at most 1.8e+308)" in message
    assert "0" * 100 not in message  # the value is not copied into the message whole


def test_a_wait_past_max_backoff_is_max_backoff_however_many_attempts_came_before() -> None:
    # The power overflows a float long before the attempts run out; the wait is capped first.
    policy = RetryPolicy(attempts=500, backoff=0.5, multiplier=10, max_backoff=5, jitter=0)
    assert [policy.delay(n, "k") for n in (1, 2, 310, 320, 500)] == [0.5, 5, 5, 5, 5]
    assert RetryPolicy(attempts=2000, max_backoff=1, jitter=0).delay(1025, "k") == 1
    jittered = RetryPolicy(attempts=10**9, backoff=2, multiplier=1.5, max_backoff=60, jitter=0.5)
    assert 30 <= jittered.delay(10**9, "k") <= 90
    assert jittered.delay(10**9, "k") == jittered.delay(10**9, "k")


def reference_delay(policy: RetryPolicy, attempt: int, key: str) -> float | None:
    """The wait as first written: the power, capped, jittered; ``None`` where it overflowed."""
    try:
        base = min(policy.max_backoff, policy.backoff * policy.multiplier ** (attempt - 1))
    except OverflowError:
        return None
    if not policy.jitter or not base:
        return base
    digest = hashlib.blake2b(f"{policy.seed}:{key}:{attempt}".encode(), digest_size=8)
    unit = int.from_bytes(digest.digest(), "big") / 2**64
    return round(base * (1 + policy.jitter * (2 * unit - 1)), 6)


@pytest.mark.slow
@given(
    attempt=st.integers(1, 3000),
    backoff=st.floats(0, 1e6) | st.integers(0, 10**6),
    multiplier=st.floats(1, 1e3) | st.integers(1, 1000),
    max_backoff=st.floats(0, 1e300) | st.integers(0, 10**6),
    jitter=st.sampled_from([0, 0.1, 1]),
)
def test_each_wait_is_the_capped_power_it_always_was_and_at_most_the_cap_where_that_overflowed(
    attempt: int, backoff: float, multiplier: float, max_backoff: float, jitter: float
) -> None:
    policy = RetryPolicy(
        backoff=backoff, multiplier=multiplier, max_backoff=max_backoff, jitter=jitter
    )
    wait = policy.delay(attempt, "run:task")
    expected = reference_delay(policy, attempt, "run:task")
    if expected is None:
        assert 0 <= wait <= max_backoff * (1 + jitter) + 1e-5
    else:  # the same wait, of the same type: history stores it (1 and 1.0 differ in JSON)
        assert (wait, type(wait)) == (expected, type(expected))
