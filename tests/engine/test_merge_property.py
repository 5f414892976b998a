"""Property: the merged state of a superstep does not depend on the order its tasks finish."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from backends import BACKENDS
from nodestep import END, START, BaseState, Command, Graph, NodeContext, Send, add, merge_dict, node


def fold(current: str, update: str) -> str:
    # Not commutative: the result shows the order writes were merged in.
    return f"({current}+{update})"


def keep_last(current: str, update: str) -> str:
    # Several tasks of one node write it: a plain field would refuse their different values.
    return update


class S(BaseState):
    item: int = 0
    last: Annotated[str, keep_last] = ""
    log: Annotated[list[str], add] = Field(default_factory=list)
    table: Annotated[dict[str, str], merge_dict] = Field(default_factory=dict)
    trail: Annotated[str, fold] = ""


NAMES = ("n_c", "n_a", "n_b")
SENDS = 3
turns: list[str] = []  # the tasks finish in this order: each waits for the one before it
done: dict[str, anyio.Event] = {}  # set as each task finishes; new for each run
finished: list[str] = []


async def _work(task_id: str) -> None:
    position = turns.index(task_id)
    if position:
        await done[turns[position - 1]].wait()


def _done(task_id: str) -> None:
    finished.append(task_id)
    done[task_id].set()


def _make(name: str):
    async def f(state: S, ctx: NodeContext):
        await _work(ctx.task_id)
        _done(ctx.task_id)
        return {
            "log": [name],
            "table": {"shared": name, name: name},
            "trail": name,
        }

    return node(f, name=name)


@node
async def worker(state: S, ctx: NodeContext):
    await _work(ctx.task_id)
    _done(ctx.task_id)
    tag = f"w{state.item}"
    return {"log": [tag], "table": {"shared": tag}, "trail": tag, "last": tag}


@node(goto=[*NAMES, "worker"])
def fan(state: S):
    return Command(goto=[*NAMES, *(Send(worker, {"item": i}) for i in range(SENDS))])


TASK_IDS = ["n_a", "n_b", "n_c", "worker", "worker[1]", "worker[2]"]
GRAPH = Graph(S).flow(START >> fan, *(_make(n) >> END for n in NAMES), worker >> END)

EXPECTED_UPDATES = [
    (0, "fan", None),
    *(
        (1, n, {"log": [n], "table": {"shared": n, n: n}, "trail": n})
        for n in ("n_a", "n_b", "n_c")
    ),
    *(
        (1, t, {"log": [f"w{i}"], "table": {"shared": f"w{i}"}, "trail": f"w{i}", "last": f"w{i}"})
        for i, t in enumerate(["worker", "worker[1]", "worker[2]"])
    ),
]
EXPECTED_STATE = {
    "item": 0,
    "last": "w2",
    "log": ["n_a", "n_b", "n_c", "w0", "w1", "w2"],
    "table": {"shared": "w2", "n_a": "n_a", "n_b": "n_b", "n_c": "n_c"},
    "trail": "((((((+n_a)+n_b)+n_c)+w0)+w1)+w2)",
}


async def _run() -> tuple[list[tuple[int, str, Any]], dict[str, Any]]:
    done.clear()
    done.update({task_id: anyio.Event() for task_id in TASK_IDS})
    updates = []
    final = None
    async for event in GRAPH.astream({}, stream_mode="updates"):
        if event.mode == "updates":
            updates.append((event.step, event.task_id, event.data))
        else:
            final = event.data.state.model_dump()
    assert final is not None
    return updates, final


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=30, deadline=None)
@given(st.permutations(TASK_IDS))
def test_merged_state_does_not_depend_on_task_completion_order(backend: str, order: list[str]):
    turns[:] = order
    finished.clear()
    updates, final = anyio.run(_run, backend=backend)
    assert finished == order
    assert updates == EXPECTED_UPDATES
    assert final == EXPECTED_STATE


@pytest.mark.anyio
async def test_tasks_finishing_in_reverse_order_still_merge_in_scheduling_order():
    # The property's case furthest from scheduling order, run every time.
    turns[:] = TASK_IDS[::-1]
    finished.clear()
    try:
        updates, final = await _run()
    finally:
        turns.clear()
    assert finished == TASK_IDS[::-1]
    assert updates == EXPECTED_UPDATES
    assert final == EXPECTED_STATE
