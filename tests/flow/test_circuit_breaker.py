"""CircuitBreaker: closed, open after N failures in a window, half-open after the cool-down."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep import CircuitBreaker, GraphConfigError


def test_it_opens_after_n_failures_within_the_window() -> None:
    breaker = CircuitBreaker(failures=3, window=10, cooldown=5)
    error = ConnectionError("down")
    assert breaker.after_call(0.0, error) is None
    assert breaker.after_call(1.0, error) is None
    assert breaker.after_call(2.0, error) == "open"
    assert breaker.state == "open"
    assert breaker.before_call(3.0) == (False, 4.0, None)


def test_failures_older_than_the_window_do_not_count() -> None:
    breaker = CircuitBreaker(failures=2, window=10, cooldown=5)
    breaker.after_call(0.0, ValueError())
    assert breaker.after_call(10.5, ValueError()) is None
    assert breaker.state == "closed"


def test_after_the_cooldown_one_trial_goes_through_and_its_success_closes_it() -> None:
    breaker = CircuitBreaker(failures=1, window=10, cooldown=5)
    breaker.after_call(0.0, ValueError())
    assert breaker.before_call(5.0) == (True, 0.0, "half_open")
    assert breaker.before_call(5.1)[0] is False  # one trial at a time
    assert breaker.after_call(6.0, None) == "closed"
    assert breaker.before_call(6.0) == (True, 0.0, None)


def test_a_failed_trial_opens_it_for_another_cooldown() -> None:
    breaker = CircuitBreaker(failures=1, window=10, cooldown=5)
    breaker.after_call(0.0, ValueError())
    breaker.before_call(5.0)
    assert breaker.after_call(6.0, ValueError()) == "open"
    assert breaker.before_call(10.0)[0] is False
    assert breaker.before_call(11.0) == (True, 0.0, "half_open")


def test_a_trial_that_paused_frees_the_trial_slot() -> None:
    breaker = CircuitBreaker(failures=1, window=10, cooldown=0)
    breaker.after_call(0.0, ValueError())
    assert breaker.before_call(0.0)[2] == "half_open"
    breaker.release()
    assert breaker.before_call(0.0)[0] is True


def test_errors_outside_failure_on_do_not_count() -> None:
    breaker = CircuitBreaker(failures=1, failure_on=ConnectionError)
    assert breaker.after_call(0.0, KeyError("x")) is None
    assert breaker.state == "closed"
    assert breaker.after_call(0.0, ConnectionError()) == "open"


def test_reset_closes_it() -> None:
    breaker = CircuitBreaker(failures=1)
    breaker.after_call(0.0, ValueError())
    breaker.reset()
    assert breaker.state == "closed"
    assert breaker.before_call(0.0)[0] is True


@pytest.mark.slow
@given(st.lists(st.tuples(st.booleans(), st.floats(0, 5)), max_size=60))
def test_it_is_open_exactly_when_n_failures_fell_in_a_window_since_it_last_closed(
    calls: list[tuple[bool, float]],
) -> None:
    # A model of the closed state: no cooldown ends in these calls (the times only grow by
    # at most 5 s per call and the cool-down is 1000 s), so once open it stays open.
    breaker = CircuitBreaker(failures=3, window=8, cooldown=1000)
    now, failures, opened = 0.0, [], False
    for failed, gap in calls:
        now += gap
        allowed, _, _ = breaker.before_call(now)
        assert allowed is not opened
        if not allowed:
            continue
        breaker.after_call(now, ValueError() if failed else None)
        if failed:
            failures = [t for t in failures if t > now - 8] + [now]
            opened = len(failures) >= 3
    assert breaker.state == ("open" if opened else "closed")


def test_threads_share_it_without_losing_a_failure() -> None:
    breaker = CircuitBreaker(failures=400, window=1000, cooldown=1000)

    def fail() -> None:
        for _ in range(100):
            breaker.after_call(1.0, ValueError())

    threads = [threading.Thread(target=fail) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert breaker.state == "open"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"failures": 0}, "failures"),
        ({"window": 0}, "window"),
        ({"cooldown": -1}, "cooldown"),
        ({"failure_on": 3}, "failure_on"),
        ({"cooldown": 10**400}, "cooldown"),
        ({"window": 10**400}, "window"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_by_name(settings: dict, named: str) -> None:
    with pytest.raises(GraphConfigError, match=rf"CircuitBreaker\({named}="):
        CircuitBreaker(**settings)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_a_child_forked_while_another_thread_holds_a_breaker_can_use_it() -> None:
    # A child has only the thread that forked: a lock held by another thread at that moment
    # would stay held in the child forever, and its first call through the breaker would hang.
    breaker = CircuitBreaker(failures=1)
    assert breaker.after_call(0.0, RuntimeError("down")) == "open"
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with breaker._lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        signal.alarm(10)  # a hang kills the child, and the test fails instead of hanging
        allowed, _, moved = breaker.before_call(now=1_000.0)
        os._exit(0 if (allowed, moved) == (True, "half_open") else 3)
    release.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
