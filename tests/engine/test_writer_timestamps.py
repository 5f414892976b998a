"""A record's timestamp is stored as ``round(ts, 6)`` would give it, however it is computed."""

from __future__ import annotations

import math
import time

from hypothesis import example, given
from hypothesis import strategies as st

from nodestep._engine.writer import round_ts


def _same(a: float, b: float) -> bool:
    return type(a) is type(b) and (repr(a) == repr(b) or (math.isnan(a) and math.isnan(b)))


@given(st.floats(min_value=0.0, max_value=5e9) | st.floats(allow_nan=True) | st.integers())
@example(1733400000.0000005)  # a tie in floats: rounded from the exact value
@example(0.0000005)
@example(0.0000015)
@example(3999999999.9999995)
@example(-1.5)
@example(float("inf"))
def test_round_ts_gives_the_float_round_gives(ts: float) -> None:
    assert _same(round_ts(ts), round(ts, 6))


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=3))
def test_round_ts_of_a_clock_value_on_a_tie_rounds_as_round(micros: int, quarter: int) -> None:
    # time.time() values whose millionfold float ends in .5 (a quarter of them) take the
    # exact path; these are built to land there or next to it.
    ts = 1.7e9 + micros / 1e6 + quarter * 0.25e-6
    assert _same(round_ts(ts), round(ts, 6))


def test_round_ts_of_the_clock_now_gives_the_float_round_gives() -> None:
    for _ in range(10_000):
        ts = time.time()
        assert _same(round_ts(ts), round(ts, 6))
