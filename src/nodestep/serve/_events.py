"""A run's outgoing events, kept so that any number of clients can follow the run.

The run writes each event once; every stream of it (the request that started it, a
``join_stream``, a reconnect with ``Last-Event-ID``) reads the same list from where it
stands. Why a list and a wake-up event rather than a queue per client: a client that
joins late, or comes back, must see what it missed, and a slow client must never hold
the run back.
"""

from __future__ import annotations

from typing import Any

import anyio

__all__ = ["RunEvents"]


class RunEvents:
    """The events of one run, numbered from 0, and whether the run has ended.

    Attributes:
        result: The run's final JSON answer (values, or ``__error__``) once it ended.
        finished: Set when the run ends.
    """

    def __init__(self) -> None:
        self._events: list[tuple[str, Any]] = []
        self._changed = anyio.Event()
        self.finished = anyio.Event()
        self.result: dict[str, Any] | None = None

    def add(self, event: str, data: Any) -> None:
        """Append an event and wake the clients that wait for one."""
        self._events.append((event, data))
        self._changed.set()
        self._changed = anyio.Event()

    def end(self, result: dict[str, Any]) -> None:
        """Mark the run ended with its final answer."""
        self.result = result
        self.finished.set()
        self._changed.set()

    def since(self, index: int) -> list[tuple[str, Any]]:
        """Return the events from number ``index`` on."""
        return self._events[index:]

    async def wait_past(self, index: int) -> None:
        """Wait until there is an event numbered ``index`` or the run has ended."""
        while len(self._events) <= index and not self.finished.is_set():
            await self._changed.wait()
