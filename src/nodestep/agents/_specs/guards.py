"""A ToolNode's ``circuit_breaker`` and ``timeout``, applied around each call of its function.

A tool's failure goes back to the model as an error tool message (see ``steps``), so the
engine never sees a tool fail: a breaker on the tool's graph node would never count a
failure, and a timeout there would fail the whole step, the reply's other calls with it.
So a ToolNode's breaker and timeout stay off its graph node and guard its function here:
a call the breaker refuses fails with ``CircuitOpenError`` without running, one past the
limit with ``NodeTimeoutError``, and either goes back to the model, or along the tool's
``$is_error`` edge, as any failure of the tool does. The arguments are checked before, so
a call that does not fit never counts against the breaker; a declared ``retry`` runs the
guarded call again, each attempt counted.

The breaker's state is the process's, as a node's breaker's is; the tool's last counted
failure is kept beside it, so the refusal can tell the model why the tool is off.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from nodestep._errors import CircuitOpenError, NodeTimeoutError
from nodestep._flow.resilience import CircuitBreaker

__all__ = ["ToolGuard"]


class ToolGuard:
    """The breaker and the time limit of one ToolNode's function.

    Args:
        name: The ToolNode's name.
        breaker: Its ``circuit_breaker``, or ``None``.
        timeout: Its ``timeout`` in seconds, or ``None``.
        clock: The breaker's clock, in seconds.
    """

    def __init__(
        self,
        name: str,
        breaker: CircuitBreaker | None,
        timeout: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.breaker = breaker
        self.timeout = timeout
        self.clock = clock
        self.last = ""
        """The last failure the breaker counted, as ``Type: message``."""

    async def call(self, run: Callable[[], Awaitable[Any]]) -> Any:
        """Return what ``run`` returns, if the breaker lets it run and it ends in time.

        Raises:
            CircuitOpenError: the breaker is open: ``run`` was not called.
            NodeTimeoutError: ``run`` took longer than the timeout, and was cancelled.
            Exception: whatever ``run`` raises.
        """
        breaker = self.breaker
        if breaker is None:
            return await self._limited(run)
        allowed, left, _ = breaker.before_call(self.clock())
        if not allowed:
            raise CircuitOpenError(self.name, left)
        try:
            found = await self._limited(run)
        except Exception as error:
            if breaker.counts(error):
                self.last = f"{type(error).__name__}: {error}"
            breaker.after_call(self.clock(), error)
            raise
        except BaseException:  # cancelled or paused: a half-open trial must not stay taken
            breaker.release()
            raise
        breaker.after_call(self.clock(), None)
        return found

    async def _limited(self, run: Callable[[], Awaitable[Any]]) -> Any:
        if self.timeout is None:
            return await run()
        with anyio.move_on_after(self.timeout):
            return await run()
        # Reached only when the limit cancelled the call.
        raise NodeTimeoutError(self.name, self.timeout)

    def answer(self, error: Exception) -> str | None:
        """Return what the model reads for a refusal or a timeout of this guard, else ``None``.

        The errors' own messages speak to the developer (``breaker.reset()``); the model
        is told what happened to its call, and when it may call again.
        """
        if isinstance(error, CircuitOpenError) and error.node == self.name:
            why = f" (last: {self.last})" if self.last else ""
            left = error.retry_after
            when = f"lets a trial call through in {left:.3g}s" if left > 0 else "is trying a call"
            return (
                f"Error: {self.name} was not called: its circuit breaker opened after it "
                f"failed{why}, and {when}. Answer without it until then."
            )
        if isinstance(error, NodeTimeoutError) and error.node == self.name:
            return f"Error: {self.name} did not answer within its {error.timeout:g}s timeout."
        return None
