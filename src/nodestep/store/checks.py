"""``check_records``: refuse records that are not the next events of a branch.

The built-in stores check every record before they store anything, and refuse a bad one
with a ``StateStoreError`` that says which record and why. A store of your own calls
``check_records`` first in ``append`` and ``create_branch`` to refuse the same records with
the same words, which the conformance suite (``nodestep.testing``) expects.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodestep.store._checks import encode_events
from nodestep.store.base import Record

__all__ = ["check_records"]


def check_records(
    thread_id: str, branch_id: str, records: Sequence[Record], first_seq: int
) -> None:
    """Check ``records`` as the next events of a branch, before storing any of them.

    Each must be a dict with ``id`` (a string), ``seq`` (``first_seq``, ``first_seq + 1``,
    ...), ``ts`` (a number), ``thread`` and ``branch`` (these ones), ``type`` (a string that
    is not one of the file store's own line types) and only JSON data: dicts with string
    keys, lists, strings, integers within 64 bits, finite floats, booleans and ``None``.

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
