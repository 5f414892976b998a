"""Ids and clocks for history records; a graph takes its own for deterministic histories."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "IdFactory", "new_id", "system_clock"]

IdFactory = Callable[[], str]
"""Makes a new id: a string unique in its thread (``new_id`` makes uuid4 strings)."""

Clock = Callable[[], float]
"""Returns the time as seconds since the epoch, like ``time.time``."""

_lock = threading.Lock()
_pool = ""  # random bytes in hex, 32 characters an id
_pos = 0

# The uuid4 variant: the top two bits of the 17th hex digit are 10.
_VARIANT = {f"{d:x}": f"{(d & 0x3) | 0x8:x}" for d in range(16)}


def new_id() -> str:
    """Return a random RFC 4122 version 4 UUID in its canonical dashed form."""
    # One urandom call per 128 ids, in hex once: a getrandom syscall per id would cost about
    # as much as the rest of a small superstep's bookkeeping. Graphs are shared between
    # threads, so the pool is taken under a lock; a forked child empties it
    # (_after_fork_in_child), so children never repeat ids, without a getpid() call per id.
    global _pool, _pos
    with _lock:
        if _pos >= len(_pool):
            _pool = os.urandom(2048).hex()
            _pos = 0
        start = _pos
        _pos = start + 32
        h = _pool[start : start + 32]  # in the lock: another thread may refill the pool
    # The version digit (13th) is 4, as uuid4's: its random digit is dropped.
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def _after_fork_in_child() -> None:
    # A lock another thread held at fork time stays held in the child forever; the pool's
    # bytes are the parent's, whose next ids the child must not repeat.
    global _lock, _pool, _pos
    _lock = threading.Lock()
    _pool, _pos = "", 0


os.register_at_fork(after_in_child=_after_fork_in_child)

system_clock: Clock = time.time
