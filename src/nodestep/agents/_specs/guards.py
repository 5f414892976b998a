"""A node's ``circuit_breaker`` and ``timeout``, applied around its own work.

Every node of an agent handles its failures itself (see ``steps``): a tool's goes back to
the model as an error tool message, and any node's failure takes the node's ``$is_error``
edge, whose target reads ``<node> failed: <error>``. So a node's breaker and timeout stay
off its graph node, where the engine would keep those failures from the node (a refusal
or a timeout would reach the edge's target without its error, and a breaker there never
counts a failure an edge took), and guard the node's work here instead: a ToolNode's
function, an LLMNode's turn, a function node's function. A call the breaker refuses fails
with ``CircuitOpenError`` without running, one past the limit with ``NodeTimeoutError``,
and either goes where any failure of the node goes. A tool call whose arguments do not
fit never counts against the breaker; a declared ``retry`` runs the guarded work again,
each attempt counted.

The breaker's state is the process's, as a graph node's breaker's is; the node's last
counted failure is kept beside it, so a tool's refusal can tell the model why the tool
is off. That refusal may come in any later step, of any conversation, so the failure is
kept masked (``masking.mask``) by the step it failed in: the only one that knows the
context and the credentials the failure may quote.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from nodestep._errors import CircuitOpenError, NodeTimeoutError
from nodestep._flow.resilience import CircuitBreaker
from nodestep.agents._specs.masking import mask

__all__ = ["Guard"]

T = TypeVar("T")

# The errors' advice, in the manifest's terms rather than a graph's.
_STEP_LATER = (
    "Step again after that; the breaker is declared by the node's circuit_breaker, and "
    "starts closed when the agent is made anew."
)
_LONGER = "give it a longer timeout in its manifest if it needs one, or a retry to try again"


class Guard:
    """The breaker and the time limit of one node's work.

    Args:
        name: The node's name.
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
        """The last failure the breaker counted, as ``Type: message``, masked."""

    async def call(self, run: Callable[[], Awaitable[T]]) -> T:
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
            raise CircuitOpenError(self.name, left, fix=_STEP_LATER)
        try:
            found = await self._limited(run)
        except Exception as error:
            if breaker.counts(error):  # masked now: a later step has other masks
                self.last = mask(f"{type(error).__name__}: {error}")
            breaker.after_call(self.clock(), error)
            raise
        except BaseException:  # cancelled or paused: a half-open trial must not stay taken
            breaker.release()
            raise
        breaker.after_call(self.clock(), None)
        return found

    async def _limited(self, run: Callable[[], Awaitable[T]]) -> T:
        if self.timeout is None:
            return await run()
        with anyio.move_on_after(self.timeout):
            return await run()
        # Reached only when the limit cancelled the call.
        raise NodeTimeoutError(self.name, self.timeout, fix=_LONGER)

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
