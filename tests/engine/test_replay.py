"""Replay equals live: the state folded from stored history is the state the run had.

A hypothesis property drives random turns (a loop of 1-120 supersteps with random add,
replace and merge writes), edits with ``update_state`` and forks, then reads the history
back through a reopened ``FilesystemStateStore`` and through a fresh ``InMemoryStateStore``
filled with the same records, at the end and at every superstep of every turn. A model
written here, independent of the engine, says what each state must be.

Separately: the same graph and input, with ids and clock injected, write the same history.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from backends import BACKENDS
from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    Replace,
    add,
    merge_dict,
    node,
    when,
)
from nodestep.store import StateStore
from nodestep.testing import sequential_ids, ticking_clock
from store_helpers import Record


class Tape(BaseState):
    i: int = 0
    n: int = 1
    program: list[int] = Field(default_factory=lambda: [0])
    items: Annotated[list[int], add] = Field(default_factory=list)
    last: int = -1
    tags: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)


def op_writes(state: dict[str, Any]) -> dict[str, Any]:
    """What one superstep writes: chosen by the program, from the state alone."""
    i = state["i"]
    op = state["program"][i % len(state["program"])]
    update: dict[str, Any] = {"i": i + 1}
    if op in (0, 2):
        update["items"] = [i]
    if op in (1, 2):
        update["last"] = i * 7 % 11
    if op == 3:
        update["tags"] = {f"t{i % 4}": i}
    return update


@node
def step(state: Tape) -> dict:
    return op_writes(state.model_dump())


def tape_graph(store: StateStore, **settings: Any) -> Graph[Tape]:
    graph = Graph(Tape, state_store=store, max_steps=130, **settings)
    return graph.flow(START >> step, step >> when(lambda s: s.i < s.n, step, otherwise=END))


# -- the model -------------------------------------------------------------------------------

MERGING = {"items": "add", "tags": "merge"}


def model_apply(state: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(state)
    for key, value in update.items():
        if isinstance(value, Replace):
            out[key] = copy.deepcopy(value.value)
        elif MERGING.get(key) == "add":
            out[key] = out[key] + list(value)
        elif MERGING.get(key) == "merge":
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def model_turn(state: dict[str, Any], patch: dict[str, Any]) -> list[dict[str, Any]]:
    """The state after each superstep of a turn started with ``patch``."""
    state = model_apply(state, patch)
    states = []
    while True:
        state = model_apply(state, op_writes(state))
        states.append(state)
        if not state["i"] < state["n"]:
            return states


DEFAULTS = Tape().model_dump()

# -- the actions -------------------------------------------------------------------------------

int64s = st.integers(-(2**63), 2**63 - 1)  # JSON integers as stores keep them
turns = st.builds(
    lambda n, program, items: ("turn", {"i": 0, "n": n, "program": program, "items": items}),
    st.integers(1, 120),
    st.lists(st.integers(0, 3), min_size=1, max_size=5),
    st.lists(st.integers(-5, 5), max_size=2),
)
updates = st.one_of(
    st.builds(lambda v: ("update", {"items": v}), st.lists(st.integers(-9, 9), max_size=3)),
    st.builds(lambda v: ("update", {"last": v}), st.integers(-100, 100)),
    st.builds(lambda v: ("update", {"items": Replace(v)}), st.lists(int64s, max_size=3)),
    st.builds(lambda k, v: ("update", {"tags": {k: v}}), st.sampled_from("abc"), int64s),
)
forks = st.builds(lambda where: ("fork", where), st.floats(0, 1))
actions = st.lists(
    st.sampled_from(["turn", "turn", "update", "fork"]).flatmap(
        {"turn": turns, "update": updates, "fork": forks}.__getitem__
    ),
    min_size=1,
    max_size=6,
)


async def copy_into_memory(source: StateStore, thread_id: str, branches: list[str]) -> StateStore:
    """A fresh InMemoryStateStore holding the same records: a reader that shares nothing."""
    target = InMemoryStateStore()
    forks = {b.id: b for b in await source.list_branches(thread_id)}
    for branch_id in branches:
        stored = await source.read(thread_id, branch_id)
        if branch_id == "main":
            await target.append(thread_id, branch_id, stored, after=0)
        else:
            assert await target.create_branch(forks[branch_id], stored[:1])
            await target.append(thread_id, branch_id, stored[1:], after=stored[0]["seq"])
    return target


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(script=actions)
def test_state_read_back_from_the_store_equals_the_live_state(
    backend: str, script: list[Any]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "replay.jsonl"
        anyio.run(_replay_equals_live, path, script, backend=backend)


async def _replay_equals_live(path: Path, script: list[Any]) -> None:
    store = FilesystemStateStore(path)
    graph = tape_graph(store)
    branch = "main"
    model: dict[str, Any] | None = None
    # (branch, event id, expected state) at every point the live run reported one.
    points: list[tuple[str, str, dict[str, Any]]] = []
    branches = ["main"]

    for kind, arg in script:
        if kind == "turn":
            expected = model_turn(model or DEFAULTS, arg)
            seen = []
            async for event in graph.astream(
                arg, thread_id="t", branch_id=branch, stream_mode="values"
            ):
                if event.mode == "values":
                    seen.append(event.data)
                    points.append((branch, event.checkpoint_id, event.data))
                else:
                    final = event
            assert seen == expected
            assert final.mode == "final" and final.data.state.model_dump() == expected[-1]
            model = expected[-1]
        elif kind == "update":
            event_id = await graph.update_state("t", arg, branch_id=branch, create=True)
            model = model_apply(model or DEFAULTS, arg)
            points.append((branch, event_id, model))
        elif points:
            on_branch = [p for p in points if p[0] == branch] or points
            _, event_id, state = on_branch[int(arg * (len(on_branch) - 1))]
            branch = (await graph.fork("t", from_=event_id)).id
            branches.append(branch)
            model = state
            points.append((branch, (await graph.get_state("t", branch_id=branch)).event_id, state))

    if model is None:
        await store.aclose()
        return
    assert await graph.load("t", branch_id=branch) == model
    # The graph's cached latest state of every branch is what a new graph reads.
    for name in branches:
        cached = await graph.get_state("t", branch_id=name)
        assert cached == await tape_graph(store).get_state("t", branch_id=name)
    await store.aclose()

    reopened = FilesystemStateStore(path)
    fresh = await copy_into_memory(reopened, "t", branches)
    for reader_store in (reopened, fresh):
        reader = tape_graph(reader_store)
        assert await reader.load("t", branch_id=branch) == model
        assert (await reader.get_state("t", branch_id=branch)).value == Tape(**model)
        for point_branch, event_id, state in points:
            assert await reader.load("t", at=event_id) == state
            snapshot = await reader.get_state("t", at=event_id)
            assert snapshot.branch_id == point_branch
    await reopened.aclose()


# -- determinism ------------------------------------------------------------------------------


async def deterministic_history(kind: str, tmp_path: Path) -> list[list[Record]]:
    store: StateStore = InMemoryStateStore()
    if kind == "filesystem":
        store = FilesystemStateStore(tmp_path / f"det-{len(list(tmp_path.iterdir()))}.jsonl")
    graph = tape_graph(store, id_factory=sequential_ids(), clock=ticking_clock())

    first = await graph.ainvoke({"n": 60, "program": [0, 1, 3]}, thread_id="t")
    await graph.update_state("t", {"items": [99]})
    branch = await graph.fork("t", from_=first.checkpoint_id)
    await graph.ainvoke({"i": 0, "n": 5, "program": [2]}, thread_id="t", branch_id=branch.id)
    await graph.ainvoke({"i": 0, "n": 3}, thread_id="t")
    histories = [await store.read("t", "main"), await store.read("t", branch.id)]
    await store.aclose()
    return histories


@pytest.mark.parametrize("kind", ["memory", "filesystem"])
@pytest.mark.anyio
async def test_injected_ids_and_clock_give_an_identical_history(kind: str, tmp_path: Path) -> None:
    once = await deterministic_history(kind, tmp_path)
    twice = await deterministic_history(kind, tmp_path)
    assert len(once[0]) > 60 and len(once[1]) > 5

    def without(key: str, histories: list[list[Record]]) -> list[list[Record]]:
        return [[{k: v for k, v in r.items() if k != key} for r in h] for h in histories]

    # Pinpoint a difference: everything but the run ids first, then the run ids too.
    assert without("run", once) == without("run", twice)
    runs = [[r.get("run") for r in h] for h in (*once, *twice)]
    assert runs[:2] == runs[2:], "run ids are not injectable: they differ between the two runs"
    assert once == twice


class Pair(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


async def side_by_side_history(first: str) -> list[Record]:
    """Two tasks of one superstep, the one named ``first`` finishing first."""
    finished = anyio.Event()

    def finisher(name: str) -> Any:
        @node(name=name)
        async def body(state: Pair) -> dict[str, Any]:
            if name != first:
                await finished.wait()
            finished.set()
            return {"log": [name]}

        return body

    @node
    def fan(state: Pair) -> None:
        return None

    left, right = finisher("left"), finisher("right")
    store = InMemoryStateStore()
    graph = Graph(Pair, state_store=store, id_factory=sequential_ids(), clock=ticking_clock())
    graph.flow(START >> fan, fan >> [left, right], left >> END, right >> END)
    await graph.ainvoke({}, thread_id="t")
    return await store.read("t", "main")


@pytest.mark.anyio
async def test_side_by_side_tasks_change_only_their_task_finished_records_by_finishing_order() -> (
    None
):
    by_left, by_right = await side_by_side_history("left"), await side_by_side_history("right")
    envelope = ("id", "seq", "ts")

    def finished(history: list[Record]) -> list[Record]:
        return [r for r in history if r["type"] == "task_finished"]

    # Every other record is the same, byte for byte; the state too.
    others = [[r for r in h if r["type"] != "task_finished"] for h in (by_left, by_right)]
    assert others[0] == others[1]
    assert [r["node"] for r in finished(by_left)] == ["left", "right"]
    assert [r["node"] for r in finished(by_right)] == ["right", "left"]
    # The two records swap places: each slot keeps its id, sequence number and timestamp.
    slots = [[{k: r[k] for k in envelope} for r in finished(h)] for h in (by_left, by_right)]
    assert slots[0] == slots[1]
    bodies = [
        sorted((r for r in finished(h)), key=lambda r: str(r["node"])) for h in (by_left, by_right)
    ]
    strip = [[{k: v for k, v in r.items() if k not in envelope} for r in b] for b in bodies]
    assert strip[0] == strip[1]
