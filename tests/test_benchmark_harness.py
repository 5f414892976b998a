"""The benchmark harness gives every side the same place in its rounds."""

from __future__ import annotations

import gc
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

_path = Path(__file__).resolve().parents[1] / "benchmarks" / "harness.py"
_spec = importlib.util.spec_from_file_location("_bench_harness", _path)
assert _spec is not None and _spec.loader is not None
harness = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = harness  # dataclasses look their module up by name
_spec.loader.exec_module(harness)
Budget, measure, rotated = harness.Budget, harness.measure, harness.rotated


def test_rotated_starts_one_further_each_time() -> None:
    names = ["nodestep", "langgraph", "floor"]
    assert [rotated(names, i) for i in range(4)] == [
        ["nodestep", "langgraph", "floor"],
        ["langgraph", "floor", "nodestep"],
        ["floor", "nodestep", "langgraph"],
        ["nodestep", "langgraph", "floor"],
    ]
    assert rotated([], 3) == []


@pytest.mark.slow
@pytest.mark.parametrize("sides", [2, 3])
def test_each_side_runs_first_after_the_collection_equally_often(sides: int) -> None:
    order: list[str] = []
    first_after_collect: list[str] = []

    def on_collect(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            order.append("gc")

    def case(name: str) -> Callable[[], int]:
        def run() -> int:
            if order and order[-1] == "gc":
                first_after_collect.append(name)
            order.append(name)
            return 1_000

        return run

    names = [f"side{i}" for i in range(sides)]
    gc.callbacks.append(on_collect)
    try:
        budget = Budget(warmup=1, min_reps=6, max_reps=6, seconds=0.0)
        stats = measure({n: case(n) for n in names}, budget=budget)
    finally:
        gc.callbacks.remove(on_collect)
    assert set(stats) == set(names)
    timed = first_after_collect[-6:]  # the warm-up's round follows settle()'s collection
    assert sorted(timed) == sorted(names * (6 // sides))
