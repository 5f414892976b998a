"""Ids and clocks for history records; a graph takes its own for deterministic histories."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

__all__ = ["Clock", "IdFactory", "new_id", "system_clock"]

IdFactory = Callable[[], str]
"""Makes a new id: a string unique in its thread (``new_id`` makes uuid4 strings)."""

Clock = Callable[[], float]
"""Returns the time as seconds since the epoch, like ``time.time``."""

_BATCH = 256  # ids made at once: 4 KiB of random bytes, about 22 KiB of ids held

# The uuid4 bits, set on whole columns of bytes: the version nibble (byte 6's high one) is
# 4, the variant's top two bits (byte 8's) are 10.
_VERSION = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))

# Where each of an id's 32 hex digits goes in its dashed form, 36 characters and a newline.
_DIGITS = [
    (start + j, at + j)
    for start, at, width in ((0, 0, 8), (8, 9, 4), (12, 14, 4), (16, 19, 4), (20, 24, 12))
    for j in range(width)
]

_made: list[str] = []  # ids not handed out yet, taken from the end


def new_id() -> str:
    """Return a random RFC 4122 version 4 UUID in its canonical dashed form."""
    # Graphs are shared between threads: list.pop is one atomic step, so no lock is taken
    # (a with-lock cost 2k instructions an id); two threads that find the list empty at once
    # each add a batch of their own random ids, and neither repeats the other's.
    while True:
        try:
            return _made.pop()
        except IndexError:
            _made.extend(_fresh_ids(_BATCH))


def _fresh_ids(count: int) -> list[str]:
    """Return ``count`` new random uuid4 strings.

    Formatted all at once, a column of digits at a time: slicing each id and formatting
    it with an f-string cost about 7.5k instructions an id (about 6 ids a turn of W10's
    agent), the columns about 1k. One urandom call a batch, not a getrandom syscall an id.
    """
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = raw[6::16].translate(_VERSION)
    raw[8::16] = raw[8::16].translate(_VARIANT)
    digits = raw.hex().encode("ascii")
    out = bytearray(b"-" * (37 * count))
    out[36::37] = b"\n" * count
    for start, at in _DIGITS:
        out[at::37] = digits[start::32]
    return out.decode("ascii").split()


def _after_fork_in_child() -> None:
    # The ids left are the parent's next ones, which the child must not repeat.
    _made.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)

system_clock: Clock = time.time
