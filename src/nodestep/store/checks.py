"""``check_records`` and ``check_branch``: refuse records a store must not keep.

The built-in stores check every record before they store anything, and refuse a bad one
with a ``StateStoreError`` that says which record and why. A store of your own calls
``check_records`` first in ``append`` and ``check_branch`` first in ``create_branch`` to
refuse the same records with the same words, which the conformance suite
(``nodestep.testing``) expects.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodestep.store._checks import encode_branch, encode_events
from nodestep.store.base import BranchRecord, Record

__all__ = ["check_branch", "check_records"]


def check_records(
    thread_id: str, branch_id: str, records: Sequence[Record], first_seq: int
) -> None:
    """Check ``records`` as the next events of a branch, before storing any of them.

    Each must be a dict with ``id`` (a string), ``seq`` (``first_seq``, ``first_seq + 1``,
    ...), ``ts`` (a number), ``thread`` and ``branch`` (these ones), ``type`` (a string that
    is not one of the file store's own line types) and only JSON data: dicts with string
    keys, lists, strings, integers within 64 bits, floats, booleans and ``None``. The
    ``ts`` must be finite: JSON has no nan or infinity, and a record whose ``ts`` is
    written as ``null`` would make the file store's whole file unreadable.

    Args:
        thread_id: The thread appended to.
        branch_id: The branch appended to.
        records: The records, in order.
        first_seq: The sequence number the first record must have: ``after + 1`` for an
            append, ``branch.from_sequence + 1`` for a new branch.

    Raises:
        StateStoreError: A record is refused; it says which one, of which type, and why.
    """
    encode_events(thread_id, branch_id, records, first_seq)


def check_branch(branch: BranchRecord, first: Sequence[Record]) -> None:
    """Check a new branch's record and its first records, before storing any of them.

    The branch record must have string ``id``, ``thread_id``, ``parent_id`` (another
    branch) and ``from_event_id``, a ``from_sequence`` of 1 or more and a finite
    ``created_at``. ``first`` must pass ``check_records`` as the branch's records from
    ``from_sequence + 1``, and start with a ``checkpoint``: a branch is loaded from one.

    Args:
        branch: The branch to create.
        first: Its first records.

    Raises:
        StateStoreError: The branch record or a first record is refused; it says which and
            why.
    """
    encode_branch(branch, first)
