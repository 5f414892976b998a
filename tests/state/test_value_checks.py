"""Values that JSON cannot store are refused when written, so a thread never becomes
unloadable: a nan or an infinity anywhere in a field's value, not only in a plain float."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from backends import STORES
from nodestep import END, START, BaseState, Graph, StateStoreError, node
from nodestep._state.schema import StateSchema
from nodestep.store import StateStore
from store_helpers import reopened

pytestmark = pytest.mark.anyio


class Point(BaseModel):
    x: float = 0.0


class Measures(BaseState):
    plain: float = 0.0
    optional: float | None = None
    series: list[float] = Field(default_factory=list)
    gaps: list[float | None] = Field(default_factory=list)
    by_name: dict[str, float] = Field(default_factory=dict)
    pair: tuple[float, ...] = ()
    grid: list[list[float]] = Field(default_factory=list)
    point: Point = Field(default_factory=Point)
    points: list[Point] = Field(default_factory=list)
    loose: Any = None
    tags: list[str] = Field(default_factory=list)
    count: int = 0


NAN, INF = math.nan, math.inf

# A value with a nan or an infinity deep inside, for each field, and where the error says it is.
BAD = {
    "plain": (NAN, None),
    "optional": (INF, "its top level"),
    "series": ([1.0, NAN], r"\[1\]"),
    "gaps": ([None, -INF], r"\[1\]"),
    "by_name": ({"a": 1.0, "b": INF}, r"\['b'\]"),
    "pair": ((1.0, NAN), r"\[1\]"),
    "grid": ([[1.0], [2.0, NAN]], r"\[1\]\[1\]"),
    "point": (Point(x=NAN), r"\['x'\]"),
    "points": ([Point(), Point(x=INF)], r"\[1\]\['x'\]"),
}


@node
def measure(state: Measures) -> dict[str, Any]:
    return {"count": state.count + 1}


def graph(store: StateStore) -> Graph[Measures]:
    return Graph(Measures, state_store=store).flow(START >> measure, measure >> END)


@pytest.mark.parametrize("field", list(BAD))
async def test_update_state_refuses_a_nan_or_infinity_inside_a_value(
    store: StateStore, field: str
) -> None:
    value, where = BAD[field]
    g = graph(store)
    await g.ainvoke({}, thread_id="t1")
    words = f"Field '{field}' holds a float that JSON cannot store \\(nan or infinity\\)"
    if where is not None:
        words += f" at {where}"
    with pytest.raises(StateStoreError, match=words):
        await g.update_state("t1", {field: value})
    # Nothing was stored: the thread loads, in this store object and in a new one.
    assert (await g.get_state("t1")).value.count == 1
    assert (await g.get_state("t1", state_store=reopened(store))).value.count == 1


@pytest.mark.parametrize("field", ["series", "by_name", "point"])
async def test_input_with_a_nan_inside_is_refused_and_the_thread_still_loads(
    store: StateStore, field: str
) -> None:
    g = graph(store)
    await g.ainvoke({"tags": ["a"]}, thread_id="t1")
    with pytest.raises(StateStoreError, match=f"Field '{field}' holds a float"):
        await g.ainvoke({field: BAD[field][0]}, thread_id="t1")
    state = (await g.get_state("t1", state_store=reopened(store))).value
    assert (state.tags, state.count) == (["a"], 1)


async def test_a_node_writing_a_nan_inside_a_list_fails_its_run_not_the_thread(
    store: StateStore,
) -> None:
    @node
    def broken(state: Measures) -> dict[str, Any]:
        return {"series": [0.5, NAN]}

    g = Graph(Measures, state_store=store).flow(START >> broken, broken >> END)
    with pytest.raises(StateStoreError, match=r"Field 'series' holds a float .* at \[1\]"):
        await g.ainvoke({"count": 3}, thread_id="t1")
    assert (await g.load("t1", state_store=reopened(store)))["count"] == 3


def test_only_fields_that_can_hold_a_float_read_their_json_back() -> None:
    fields = StateSchema.of(Measures).fields
    assert not any(fields[name].floats for name in ("tags", "count"))
    assert all(fields[name].floats for name in (*BAD, "loose"))


def test_finite_floats_and_nulls_keep_their_stored_form() -> None:
    fields = StateSchema.of(Measures).fields
    assert fields["gaps"].to_json([None, -0.0, 1e308]) == [None, -0.0, 1e308]
    assert fields["by_name"].to_json({"null": 0.5}) == {"null": 0.5}
    assert fields["tags"].to_json(["null", "nan"]) == ["null", "nan"]


# -- any nesting, through both stores ---------------------------------------------------------

floats = st.floats(allow_nan=True, allow_infinity=True)
nested = st.recursive(
    floats | st.none() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=8,
)


class Nested(BaseState):
    grid: list[list[float]] = Field(default_factory=list)
    table: dict[str, list[float | None]] = Field(default_factory=dict)
    loose: Any = None


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(STORES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grid=st.lists(st.lists(floats, max_size=3), max_size=3),
    table=st.dictionaries(st.text(max_size=2), st.lists(floats | st.none(), max_size=3)),
    loose=nested,
)
def test_a_written_value_is_refused_or_loads_back_equal(
    kind: str, grid: list[list[float]], table: dict[str, list[float | None]], loose: Any
) -> None:
    values = {"grid": grid, "table": table, "loose": loose}
    with tempfile.TemporaryDirectory() as directory:
        store = STORES[kind](Path(directory))
        try:
            anyio.run(_write_and_reload, store, values)
        finally:
            anyio.run(store.aclose)


async def _write_and_reload(store: StateStore, values: dict[str, Any]) -> None:
    g = Graph(Nested, state_store=store)
    for field, value in values.items():
        try:
            await g.update_state(field, {field: value}, create=True)
        except StateStoreError as error:
            assert _has_non_finite(value), error
            assert f"Field '{field}'" in str(error) and "nan" in str(error)
            assert not await g.exists(field)
            continue
        assert not _has_non_finite(value)
        loaded = await g.load(field, state_store=reopened(store))
        # Compared in JSON form: 0.0 and -0.0 are equal, and so must their stored forms be.
        assert orjson.dumps(loaded[field]) == orjson.dumps(value)
