"""Appends a run sends ahead of their answers: the optional ``StateStore.open_pipe``.

A run appends its supersteps one after another. A store whose appends cross a network (or
a process boundary) can take a run's next append before it has answered the last one: it
sends each at once, checks each on the server as before, and the engine reads the answers
later, at most ``depth`` behind and always before the run returns, pauses, fails or streams
an event. An append sent after one that is refused is refused too (each names the record
it follows), so the branch never holds a step whose predecessor is missing. A process that
dies may lose the appends still unanswered (a server stops at the first answer it cannot
deliver), never one before them: what stays is a prefix of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from nodestep.store._leases import Lease

__all__ = ["AppendPipe"]


class AppendPipe(Protocol):
    """One run's appends to one branch, sent before the answers to the earlier ones.

    Attributes:
        depth: How many sent appends may wait for their answers at once.
    """

    depth: int

    def __len__(self) -> int:
        """Return how many sent appends still wait for their answers."""
        ...

    async def send(
        self, lease: Lease, records: Sequence[dict[str, Any]], *, after: int, after_id: str
    ) -> bool:
        """Send an append of ``records`` after record ``after`` (whose id is ``after_id``).

        Returns:
            ``False``, sending nothing, when this append must go the usual way
            (``append_leased``), e.g. because the lease is due for renewal.

        Raises:
            StateStoreError: a record is not a valid event; nothing sent.
        """
        ...

    async def confirm(self) -> int:
        """Wait for the oldest sent append's answer; return the last sequence it stored.

        Raises:
            ThreadBusyError: the lease was lost before it; nothing of it is stored.
            ThreadConflictError: another writer appended first; the same.
            StateStoreError: the store refused it or cannot be reached.
        """
        ...

    async def close(self) -> None:
        """Read the answers still due (refusals are not raised) and free the connection."""
        ...
