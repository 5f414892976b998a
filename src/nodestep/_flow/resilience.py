"""Retry policies and circuit breakers: what a node does when the service it calls fails.

``RetryPolicy`` says how often a failing task runs again, how long it waits in between
and which errors it retries. ``CircuitBreaker`` counts a node's failures over all the runs
of the process: after too many in a window it opens, and the node fails fast until a
cool-down has passed; then one trial call goes through, and its outcome closes or opens
the breaker again. The engine drives both (``_engine.guarded``); here they are plain
objects with no I/O and no clock of their own: every method takes the time.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from nodestep._errors import (
    AgentGroupError,
    GraphConfigError,
    ModelError,
    NodestepError,
    NodeTimeoutError,
)
from nodestep._numbers import is_finite_number, shown_number

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "ErrorMatch",
    "RetryPolicy",
    "check_option",
]

ErrorMatch = (
    type[BaseException]
    | str
    | tuple[type[BaseException] | str, ...]
    | Callable[[BaseException], bool]
)
"""Which errors count: an exception class or class name, a tuple of them, or a function of
the error. A name matches an error whose class, or one of its bases, has that name (so a
manifest can name errors it cannot import)."""

BreakerState = Literal["closed", "open", "half_open"]


def _seconds(value: Any, what: str, *, zero: bool = True) -> float:
    if not (is_finite_number(value) and (value >= 0 if zero else value > 0)):
        least = "0 or more" if zero else "more than 0"
        raise GraphConfigError(
            f"{what} takes a finite number of seconds, {least}; got {shown_number(value)}."
        )
    return float(value)


def _is_error_class(value: Any) -> bool:
    return (isinstance(value, str) and value.isidentifier()) or (
        isinstance(value, type) and issubclass(value, BaseException)
    )


def _matcher(value: Any, what: str) -> ErrorMatch:
    items = value if isinstance(value, tuple) else (value,)
    if items and all(_is_error_class(item) for item in items):
        return value  # type: ignore[no-any-return]
    if callable(value) and not isinstance(value, type | tuple):
        return value  # type: ignore[no-any-return]
    raise GraphConfigError(
        f"{what} takes an exception class or class name, a tuple of them, or a function "
        f"that takes the error and returns True when it counts; got {value!r}."
    )


def _matches(match: ErrorMatch, error: BaseException) -> bool:
    if isinstance(match, type | str | tuple):
        items = match if isinstance(match, tuple) else (match,)
        names = {k.__name__ for k in type(error).__mro__}
        return any(i in names if isinstance(i, str) else isinstance(error, i) for i in items)
    return bool(match(error))


_LOG_SLACK = 1e-9
"""How far past the cap's logarithm a wait's must be to be taken as past the cap.

Why: both logarithms are rounded (by some 1e-13 at most here); a power within this of the
cap is computed instead, so a wait just below the cap is never replaced by the cap."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a node's task runs again after it fails: ``@node(retry=RetryPolicy(...))``.

    The wait before attempt ``n + 1`` is ``backoff * multiplier ** (n - 1)``, at most
    ``max_backoff``, spread by ``jitter``: a fraction either way, derived from the run id,
    the task and the attempt (and ``seed``), so a replay with the same ids waits the same
    and concurrent runs do not retry in step. Waits go through the graph's ``sleep=`` and
    the deadline through its ``clock=``, so tests inject both and never sleep.

    Each failed attempt that is retried is recorded in the thread's history
    (``task_retried``). A retry starts from the state the task first read: the failed
    attempt's writes, changes of private state and ``ctx.cache`` are dropped. An
    interrupt is not a failure: the task pauses as it would without a policy. After the
    last attempt the task fails as it would without one.

    nodestep's own errors about the graph (a bad update, an unknown route) are never
    retried, since another attempt gives the same; ``NodeTimeoutError`` (the node's
    ``timeout=``, which each attempt gets afresh) is, when ``retry_on`` matches it, and so
    is a ``ModelError`` with ``retryable`` set (a chat model's 429, 5xx or lost connection).

    Args:
        attempts: How many times the task runs at most, the first included (1 or more).
        backoff: Seconds to wait before the second attempt.
        multiplier: How much each wait grows over the one before (1 or more).
        max_backoff: The longest wait, in seconds.
        jitter: The fraction (0 to 1) by which a wait may be shorter or longer.
        retry_on: Which errors are retried: an exception class or class name (matching
            the error's class or a base), a tuple of them, or a function of the error
            that returns ``True`` to retry it. Default: any ``Exception``.
        deadline: Seconds from the start of the first attempt after which no attempt
            starts; a wait that would end past it is not waited. ``None``: no deadline.
        seed: Mixed into the jitter, to spread the retries of different policies.

    Raises:
        GraphConfigError: a setting that cannot work; the message names it.
    """

    attempts: int = 3
    backoff: float = 0.5
    multiplier: float = 2.0
    max_backoff: float = 30.0
    jitter: float = 0.1
    retry_on: ErrorMatch = Exception
    deadline: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        attempts = self.attempts
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise GraphConfigError(
                f"RetryPolicy(attempts=...) takes how often the task runs at most, the first "
                f"run included: an int of 1 or more; got {attempts!r}."
            )
        _seconds(self.backoff, "RetryPolicy(backoff=...)")
        _seconds(self.max_backoff, "RetryPolicy(max_backoff=...)")
        if self.deadline is not None:
            _seconds(self.deadline, "RetryPolicy(deadline=...)", zero=False)
        multiplier = self.multiplier
        if not (is_finite_number(multiplier) and multiplier >= 1):
            raise GraphConfigError(
                f"RetryPolicy(multiplier=...) takes a finite number of 1 or more (1: the same "
                f"wait every time); got {shown_number(multiplier)}."
            )
        if not isinstance(self.jitter, int | float) or not 0 <= self.jitter <= 1:
            raise GraphConfigError(
                f"RetryPolicy(jitter=...) takes a fraction from 0 to 1; got {self.jitter!r}."
            )
        if not isinstance(self.seed, int):
            raise GraphConfigError(f"RetryPolicy(seed=...) takes an int; got {self.seed!r}.")
        _matcher(self.retry_on, "RetryPolicy(retry_on=...)")

    def retries(self, error: BaseException) -> bool:
        """Tell whether ``error`` is one this policy retries (attempts left or not)."""
        # nodestep's own errors come again on another attempt, except a node's timeout and
        # a model's 429, 5xx or lost connection (ModelError.retryable), which may pass; and
        # sub-agents' failures, when the policy retries each (another attempt reads the
        # finished sub-agents back and continues the failed ones).
        if isinstance(error, AgentGroupError):
            return all(self.retries(f.error) for f in error.failures)
        passing = isinstance(error, NodeTimeoutError | ModelError) and (
            not isinstance(error, ModelError) or error.retryable
        )
        if isinstance(error, NodestepError) and not passing:
            return False
        return isinstance(error, Exception) and _matches(self.retry_on, error)

    def delay(self, attempt: int, key: str) -> float:
        """Return the seconds to wait after failed attempt ``attempt`` (from 1).

        Args:
            attempt: The attempt that failed.
            key: Names the task's run (run id and task id): the jitter is derived from it.
        """
        base = self._capped(attempt - 1)
        if not self.jitter or not base:
            return base
        digest = hashlib.blake2b(f"{self.seed}:{key}:{attempt}".encode(), digest_size=8)
        unit = int.from_bytes(digest.digest(), "big") / 2**64  # in [0, 1)
        return round(base * (1 + self.jitter * (2 * unit - 1)), 6)

    def _capped(self, steps: int) -> float:
        """Return ``min(max_backoff, backoff * multiplier ** steps)``, the wait unjittered.

        Why not that expression alone: the power overflows a float after a few hundred
        attempts (and an int power grows without end) while the wait has long been
        ``max_backoff``. So the power is compared with the cap by its logarithm first, and
        computed only when it may be below the cap; then it is the expression itself, so
        every wait that did not overflow stays what it was, its type included (history
        stores it, and ``1`` and ``1.0`` differ in JSON).
        """
        backoff, multiplier, cap = self.backoff, self.multiplier, self.max_backoff
        if steps <= 0 or multiplier == 1:
            return min(cap, backoff * multiplier**steps)
        if not backoff:  # zero whatever the power; of the type the product has
            return min(cap, backoff * multiplier**0)
        if cap <= backoff:
            return cap
        grown = math.log(backoff) + steps * math.log(multiplier)
        if grown > math.log(cap) + _LOG_SLACK:
            return cap
        try:
            return min(cap, backoff * multiplier**steps)
        except OverflowError:  # the power alone overflows, with a backoff close to 0
            return min(cap, math.exp(grown))


@dataclass(slots=True)
class _Counts:
    failures: deque[float] = field(default_factory=deque)
    state: BreakerState = "closed"
    opened_at: float = 0.0
    trial: bool = False  # a half-open trial call is running


class CircuitBreaker:
    """Stop calling a failing node for a while: ``@node(breaker=CircuitBreaker(...))``.

    The breaker's state lives in this object, so every run of every graph in the process
    that uses the node shares it (threads included: it takes a lock). Each process has its
    own: a breaker opened in one worker process does not open in another, and a restarted
    process starts with it closed.

    * **closed**: calls go through. A failed attempt counts; ``failures`` of them within
      ``window`` seconds open the breaker.
    * **open**: the node fails fast with ``CircuitOpenError``, without running, which is
      not retried. After ``cooldown`` seconds the breaker half-opens.
    * **half_open**: one trial call goes through (the others fail fast); if it succeeds
      the breaker closes, if it fails the breaker opens for another cool-down.

    Opening, half-opening and closing are recorded in the history of the run that saw
    the change (``breaker_changed``) and sent to its ``"debug"`` stream.

    Args:
        failures: How many failures within ``window`` open the breaker (1 or more).
        window: Seconds over which failures are counted.
        cooldown: Seconds the breaker stays open before it lets a trial call through.
        failure_on: Which errors count as failures: as ``RetryPolicy.retry_on``.
            Default: any ``Exception``.

    Raises:
        GraphConfigError: a setting that cannot work; the message names it.
    """

    def __init__(
        self,
        failures: int = 5,
        window: float = 60.0,
        cooldown: float = 30.0,
        failure_on: ErrorMatch = Exception,
    ) -> None:
        if not isinstance(failures, int) or isinstance(failures, bool) or failures < 1:
            raise GraphConfigError(
                f"CircuitBreaker(failures=...) takes how many failures open the breaker: an "
                f"int of 1 or more; got {failures!r}."
            )
        self.failures = failures
        self.window = _seconds(window, "CircuitBreaker(window=...)", zero=False)
        self.cooldown = _seconds(cooldown, "CircuitBreaker(cooldown=...)")
        self.failure_on = _matcher(failure_on, "CircuitBreaker(failure_on=...)")
        self._lock = threading.Lock()
        self._counts = _Counts()
        _BREAKERS.add(self)

    @property
    def state(self) -> BreakerState:
        """``"closed"``, ``"open"`` or ``"half_open"``, as of the last call that used it."""
        return self._counts.state

    def reset(self) -> None:
        """Close the breaker and forget its failures, e.g. once the service is known back."""
        with self._lock:
            self._counts = _Counts()

    def counts(self, error: BaseException) -> bool:
        """Tell whether ``error`` counts as a failure of the node."""
        return isinstance(error, Exception) and _matches(self.failure_on, error)

    def before_call(self, now: float) -> tuple[bool, float, BreakerState | None]:
        """Ask to call the node at time ``now``.

        Returns:
            Whether the call may go through, the seconds until a trial call may (when it
            may not), and the state the breaker moved to, if it moved (``"half_open"``).
        """
        with self._lock:
            c = self._counts
            if c.state == "closed":
                return True, 0.0, None
            if c.state == "open":
                left = c.opened_at + self.cooldown - now
                if left > 0:
                    return False, left, None
                c.state, c.trial = "half_open", True
                return True, 0.0, "half_open"
            if c.trial:
                return False, 0.0, None
            c.trial = True
            return True, 0.0, None

    def open_for(self, now: float) -> float | None:
        """Return the seconds until the breaker lets a trial call through, if it is open
        at time ``now`` and will refuse a call (else ``None``); moves it nowhere."""
        with self._lock:
            c = self._counts
            if c.state != "open":
                return None
            left = c.opened_at + self.cooldown - now
            return left if left > 0 else None

    def after_call(self, now: float, error: BaseException | None) -> BreakerState | None:
        """Report how a call that ``before_call`` let through ended at time ``now``.

        Args:
            now: The time.
            error: What the call raised, or ``None`` for a success. A pause is neither:
                report it with ``release``.

        Returns:
            The state the breaker moved to, if it moved (``"open"`` or ``"closed"``).
        """
        failed = error is not None and self.counts(error)
        with self._lock:
            c = self._counts
            if c.state == "half_open":
                c.trial = False
                if failed:
                    c.state, c.opened_at = "open", now
                    return "open"
                if error is None:
                    self._counts = _Counts()
                    return "closed"
                return None
            if not failed:
                return None
            c.failures.append(now)
            while c.failures and c.failures[0] <= now - self.window:
                c.failures.popleft()
            if c.state == "closed" and len(c.failures) >= self.failures:
                c.state, c.opened_at = "open", now
                c.failures.clear()
                return "open"
            return None

    def release(self) -> None:
        """A call let through ended without an outcome (it paused or was cancelled)."""
        with self._lock:
            self._counts.trial = False

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(failures={self.failures}, window={self.window:g}, "
            f"cooldown={self.cooldown:g}, state={self.state!r})"
        )


def check_option(value: Any, cls: type, keyword: str, node: str) -> Any:
    """Return ``value`` if it is ``None`` or a ``cls``; else refuse it with the fix.

    Raises:
        GraphConfigError: ``value`` is something else.
    """
    if value is None or isinstance(value, cls):
        return value
    raise GraphConfigError(
        f"Node '{node}' got {keyword}={value!r}; {keyword}= takes a {cls.__name__}, e.g. "
        f"@node({keyword}={cls.__name__}())."
    )


_BREAKERS: weakref.WeakSet[CircuitBreaker] = weakref.WeakSet()
"""Every breaker alive, for their locks to be made new in a forked child."""


def _new_locks_after_fork() -> None:
    # A lock another thread held at fork time stays held in the child forever; a breaker's
    # counts are the parent's and stay as they were (a child calls the same services).
    for breaker in list(_BREAKERS):
        breaker._lock = threading.Lock()


os.register_at_fork(after_in_child=_new_locks_after_fork)
