"""Ids and clocks for history records; a graph takes its own for deterministic histories."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "IdFactory", "new_id", "system_clock"]

IdFactory = Callable[[], str]
"""Makes a new id: a string unique in the store (``new_id`` makes uuid4 strings)."""

Clock = Callable[[], float]
"""Returns the time as seconds since the epoch, like ``time.time``."""

_lock = threading.Lock()
_pool = b""
_pos = 0


def _random16() -> bytes:
    # One urandom call per 256 ids: a getrandom syscall per id would cost about as much as
    # the rest of a small superstep's bookkeeping. Graphs are shared between threads, so the
    # pool is taken under a lock; a forked child empties it (_after_fork_in_child), so
    # children never repeat ids, without a getpid() call per id.
    global _pool, _pos
    with _lock:
        if _pos >= len(_pool):
            _pool = os.urandom(4096)
            _pos = 0
        start = _pos
        _pos = start + 16
        return _pool[start : start + 16]


def new_id() -> str:
    """Return a random RFC 4122 version 4 UUID in its canonical dashed form."""
    raw = bytearray(_random16())
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _after_fork_in_child() -> None:
    # A lock another thread held at fork time stays held in the child forever; the pool's
    # bytes are the parent's, whose next ids the child must not repeat.
    global _lock, _pool, _pos
    _lock = threading.Lock()
    _pool, _pos = b"", 0


os.register_at_fork(after_in_child=_after_fork_in_child)

system_clock: Clock = time.time
