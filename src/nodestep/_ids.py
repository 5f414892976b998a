"""Ids and clocks for history records; tests inject their own for deterministic histories."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

__all__ = ["Clock", "IdFactory", "new_id", "uuid4_hex"]

IdFactory = Callable[[], str]
Clock = Callable[[], float]

_pool = b""
_pos = 0
_pool_pid = 0


def _random16() -> bytes:
    # One urandom call per 256 ids: a syscall per id would cost more than the whole
    # superstep bookkeeping. The pool is refilled after fork so children never repeat ids.
    global _pool, _pos, _pool_pid
    if _pos >= len(_pool) or _pool_pid != os.getpid():
        _pool = os.urandom(4096)
        _pos = 0
        _pool_pid = os.getpid()
    chunk = _pool[_pos : _pos + 16]
    _pos += 16
    return chunk


def uuid4_hex() -> str:
    """Return a random 32-character hex id (a uuid4 without dashes), for run ids."""
    return _random16().hex()


def new_id() -> str:
    """Return a random RFC 4122 version 4 UUID in its canonical dashed form."""
    raw = bytearray(_random16())
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


system_clock: Clock = time.time
