"""A state class that changed since a thread was stored: one rule for loading, and migration."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    StateStoreError,
    StateUpdateError,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep._engine.writer import CHECKPOINT_EVERY
from nodestep._state.schema import StateSchema, StoredFieldsMismatch
from nodestep.store import StateStore
from store_helpers import records, reopened


class Old(BaseState):
    count: int = 0
    notes: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


class Trimmed(BaseState):
    """``Old`` without ``notes``."""

    count: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)


class Grown(BaseState):
    """``Old`` with a new field."""

    count: int = 0
    notes: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=lambda: ["new"])


class Renamed(BaseState):
    """``Old`` with ``notes`` renamed to ``remarks``, a list."""

    count: int = 0
    remarks: list[str] = Field(default_factory=list)
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def bump(state: Any) -> dict[str, Any]:
    return {"count": state.count + 1, "log": ["bump"]}


def graph_of(state: type[BaseState], store: StateStore) -> Graph[Any]:
    return Graph(state, state_store=store).flow(START >> bump, bump >> END)


def stored_thread(updates: int, notes_in_tail: bool) -> InMemoryStateStore:
    """A thread of ``Old`` with ``notes`` set, then ``updates`` single-record edits."""
    store = InMemoryStateStore()
    old = graph_of(Old, store)
    old.invoke({"notes": "keep me"}, thread_id="t")
    for i in range(updates):
        old.update_state_sync("t", {"count": i})
    if notes_in_tail:
        old.update_state_sync("t", {"notes": "changed"})
    return store


# -- one rule, wherever the last checkpoint falls -------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    updates=st.integers(min_value=0, max_value=2 * CHECKPOINT_EVERY + 5),
    notes_in_tail=st.booleans(),
)
def test_a_class_without_a_stored_field_refuses_the_thread_wherever_the_checkpoint_falls(
    updates: int, notes_in_tail: bool
):
    store = stored_thread(updates, notes_in_tail)
    new = graph_of(Trimmed, store)
    message = (
        r"Thread 't' \(branch 'main'\) cannot be loaded: its event \d+ .*holds fields that no "
        r"longer fit the state class\. The stored \w+ \w+ 'notes', which is not a field of "
        r"Trimmed.*Migrate the thread to Trimmed with graph\.migrate\(.*or add 'notes' back"
    )
    for read in (new.load_sync, new.get_state_sync):
        with pytest.raises(StateStoreError, match=message) as info:
            read("t")
        assert isinstance(info.value.__cause__, StoredFieldsMismatch)
        assert info.value.__cause__.fields == ["notes"]
    with pytest.raises(StateStoreError, match=message):
        new.invoke({}, thread_id="t")
    # Nothing was written by the refused run: the old class still reads everything.
    assert graph_of(Old, store).load_sync("t")["notes"] == (
        "changed" if notes_in_tail else "keep me"
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(updates=st.integers(min_value=0, max_value=2 * CHECKPOINT_EVERY + 5))
def test_a_class_with_a_new_field_loads_the_thread_with_the_field_default(updates: int):
    store = stored_thread(updates, notes_in_tail=False)
    values = graph_of(Grown, store).load_sync("t")
    assert values["tags"] == ["new"]
    assert values["notes"] == "keep me"


def test_a_stored_update_with_a_removed_field_is_refused_like_a_checkpoint():
    schema = StateSchema.of(Trimmed)
    for decode in (
        lambda: schema.writes_from_json({"notes": "x", "count": 1}, None),
        lambda: schema.fields_from_json({"notes": "x"}),
        lambda: schema.values_from_json({"notes": "x", "count": 1, "log": []}),
    ):
        with pytest.raises(StateStoreError, match=r" 'notes', which is not a field of Trimmed"):
            decode()


# -- migration ------------------------------------------------------------------------------


def to_renamed(old: dict[str, Any]) -> dict[str, Any]:
    return {"count": old["count"], "remarks": [old["notes"]], "log": old["log"]}


@pytest.mark.anyio
async def test_migrate_moves_a_thread_to_the_new_class_which_then_runs_it(store: StateStore):
    old = graph_of(Old, store)
    await old.ainvoke({"notes": "keep me"}, thread_id="t")
    await old.ainvoke({}, thread_id="t")
    before = (await old.history("t")).events[-1].id
    new = graph_of(Renamed, reopened(store))
    seen: list[dict[str, Any]] = []

    def fn(values: dict[str, Any]) -> dict[str, Any]:
        seen.append(values)
        return to_renamed(values)

    event_id = await new.migrate("t", fn, from_state=Old)
    assert seen == [{"count": 2, "notes": "keep me", "log": ["bump", "bump"]}]
    assert await new.load("t") == {"count": 2, "remarks": ["keep me"], "log": ["bump", "bump"]}
    result = await new.ainvoke({}, thread_id="t")
    assert result.state == Renamed(count=3, remarks=["keep me"], log=["bump"] * 3)

    last = (await records(store, "t"))[-1]
    migration = next(e for e in (await new.history("t")).events if e.id == event_id)
    assert migration.type == "checkpoint"
    assert migration.data["migration"] == {
        "from": f"{__name__}.Old",
        "to": f"{__name__}.Renamed",
    }
    assert last["type"] == "run_completed"
    # The events before the migration keep their stored values, for the old class.
    assert await graph_of(Old, reopened(store)).load("t", at=before) == {
        "count": 2,
        "notes": "keep me",
        "log": ["bump", "bump"],
    }
    with pytest.raises(StateStoreError, match=r"holds 'notes', which is not a field of Renamed"):
        await new.load("t", at=before)


@pytest.mark.anyio
async def test_the_old_class_refuses_a_migrated_thread_naming_the_migration(store: StateStore):
    await graph_of(Old, store).ainvoke({"notes": "n"}, thread_id="t")
    event_id = await graph_of(Renamed, store).migrate("t", to_renamed, from_state=Old)
    old = graph_of(Old, reopened(store))
    with pytest.raises(
        StateStoreError,
        match=rf"Thread 't' \(branch 'main'\) was migrated from {__name__}\.Old to "
        rf"{__name__}\.Renamed at its event 5 \(id '{event_id}', a 'checkpoint' record\), so "
        rf"Old cannot load it: 'remarks' would be dropped\. Load it with a graph of "
        rf"{__name__}\.Renamed",
    ):
        await old.load("t")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(updates=st.integers(min_value=0, max_value=CHECKPOINT_EVERY + 5))
def test_migrate_reads_the_folded_state_wherever_the_checkpoint_falls(updates: int):
    store = stored_thread(updates, notes_in_tail=True)
    new = graph_of(Renamed, store)
    new.migrate_sync("t", to_renamed, from_state=Old)
    count = updates - 1 if updates else 1  # the last edit's, else the run's
    expected = {"count": count, "remarks": ["changed"], "log": ["bump"]}
    assert new.load_sync("t") == expected
    steps = new.state_history_sync("t")
    assert [s.event.type for s in steps] == ["checkpoint"]
    assert steps[0].snapshot.value == Renamed(**expected)


def test_migrate_leaves_out_fields_the_function_does_not_return_as_defaults():
    store = stored_thread(0, notes_in_tail=False)
    new = graph_of(Renamed, store)
    new.migrate_sync("t", lambda old: {"count": 7}, from_state=Old)
    assert new.load_sync("t") == {"count": 7, "remarks": [], "log": []}


def test_migrate_refuses_values_that_do_not_fit_and_stores_nothing():
    store = stored_thread(0, notes_in_tail=False)
    new = graph_of(Renamed, store)
    before = len(new.history_sync("t").events)
    with pytest.raises(StateUpdateError, match=r"'migrate' wrote 'notes', which is not a field"):
        new.migrate_sync("t", lambda old: old, from_state=Old)
    with pytest.raises(StateUpdateError, match=r"returned list; return a dict of Renamed"):
        new.migrate_sync("t", lambda old: [], from_state=Old)  # type: ignore[arg-type,return-value]
    assert len(new.history_sync("t").events) == before


def test_migrate_keeps_no_reference_to_the_functions_objects():
    store = stored_thread(0, notes_in_tail=False)
    new = graph_of(Renamed, store)
    remarks = ["a"]
    new.migrate_sync("t", lambda old: {"remarks": remarks}, from_state=Old)
    remarks.append("b")
    assert new.load_sync("t")["remarks"] == ["a"]


@node
def ask(state: Any) -> dict[str, Any]:
    return {"notes": str(interrupt("why?", id="why"))}


def test_migrate_refuses_a_paused_thread_naming_its_tasks():
    store = InMemoryStateStore()
    Graph(Old, state_store=store).flow(START >> ask, ask >> END).invoke({}, thread_id="t")
    with pytest.raises(
        GraphConfigError,
        match=r"Thread 't' \(branch 'main'\) is paused in superstep 0 \(tasks 'ask'\).*Finish "
        r"the run with the old graph first",
    ):
        graph_of(Renamed, store).migrate_sync("t", to_renamed, from_state=Old)


def test_migrate_of_a_missing_thread_raises_unknown_thread():
    with pytest.raises(UnknownThreadError, match=r"Thread 'nope' has no history"):
        graph_of(Renamed, InMemoryStateStore()).migrate_sync("nope", to_renamed, from_state=Old)


def test_migrate_with_the_wrong_old_class_is_refused_naming_the_fields():
    store = stored_thread(0, notes_in_tail=False)
    with pytest.raises(
        StateStoreError, match=r"(holds|writes) 'notes', which is not a field of Trimmed"
    ):
        graph_of(Renamed, store).migrate_sync("t", to_renamed, from_state=Trimmed)
