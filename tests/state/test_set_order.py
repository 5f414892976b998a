"""A set's stored JSON form lists its items in one order, whatever the process's hash seed.

pydantic's JSON form of a set lists its items in iteration order, and the order of strings
follows ``PYTHONHASHSEED``, so two processes would store the same state as different
bytes. Within one process, two equal sets built in different orders stand for two
processes: strings that meet in one hash slot iterate in the order they were added.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, field_serializer

from nodestep import BaseState
from nodestep._state.model_form import model_json_form
from nodestep._state.schema import StateSchema
from nodestep._state.set_order import sets_in_order

STORE = """
import sys
from pydantic import BaseModel, Field
from nodestep import END, START, BaseState, Command, FilesystemStateStore, Graph, Send, node
from nodestep.testing import sequential_ids, ticking_clock


class Inner(BaseModel):
    tags: frozenset[str] = frozenset()


class Part(BaseModel):
    words: set[str]


class Tagged(BaseState):
    tags: set[str] = Field(default_factory=set)
    inner: list[Inner] = Field(default_factory=list)
    by_key: dict[str, set[int]] = Field(default_factory=dict)
    counted: int = 0


@node
def count(state: Tagged, part: Part) -> dict:
    return {"counted": len(part.words)}


@node(goto=[count])
def tag(state: Tagged) -> Command:
    words = {f"word{i}" for i in range(20)}
    return Command(
        update={
            "tags": {f"tag{i}" for i in range(20)},
            "inner": [Inner(tags=frozenset("abcdefgh"))],
            "by_key": {"k": {300, -7, 2**40, 12, 5}},
        },
        goto=[Send(count, {"words": words})],
    )


store = FilesystemStateStore(sys.argv[1])
graph = Graph(
    Tagged, state_store=store, id_factory=sequential_ids(), clock=ticking_clock()
).flow(START >> tag, count >> END)
graph.invoke({"tags": {f"in{i}" for i in range(20)}}, thread_id="t")
graph.update_state_sync("t", {"tags": {f"later{i}" for i in range(20)}})
"""


def _stored_under(seed: str, path: Path) -> bytes:
    subprocess.run(
        [sys.executable, "-c", STORE, str(path)],
        env={**os.environ, "PYTHONHASHSEED": seed},
        check=True,
    )
    header, records = path.read_bytes().split(b"\n", 1)
    assert b'"created"' in header  # the file's creation time: the one line that may differ
    return records


@pytest.mark.slow
def test_processes_with_different_hash_seeds_store_a_state_with_sets_as_the_same_bytes(
    tmp_path: Path,
) -> None:
    one = _stored_under("1", tmp_path / "one")
    other = _stored_under("2", tmp_path / "other")
    assert one == other
    assert b'"tags":["tag0","tag1","tag10","tag11"' in one
    assert b'"by_key":{"k":[-7,5,12,300,1099511627776]}' in one
    assert b'"words":["word0","word1","word10"' in one  # a Send task's input model


def _two_orders(names: list[str]) -> tuple[set[str], set[str]]:
    """Two equal sets of ``names``, built in opposite orders (their iteration orders
    differ where two names meet in one hash slot)."""
    first: set[str] = set()
    for name in names:
        first.add(name)
    second: set[str] = set()
    for name in reversed(names):
        second.add(name)
    return first, second


class Leaf(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(alias="leafName")
    marks: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Pair:
    names: frozenset[str]


class Sets(BaseState):
    names: set[str] = Field(default_factory=set)
    leaves: set[Leaf] = Field(default_factory=set)
    nested: list[dict[str, frozenset[str]]] = Field(default_factory=list)
    pair: Pair | None = None
    numbers: set[int | float] = Field(default_factory=set)


class Holder(BaseModel):
    leaf: Leaf
    names: set[str]


_names = st.lists(st.text(max_size=4), unique=True, max_size=12)


def _values(names: set[str], marks: set[str]) -> dict[str, Any]:
    return {
        "names": names,
        "leaves": {Leaf(leafName=n, marks=frozenset(marks)) for n in names},
        "nested": [{"k": frozenset(names)}],
        "pair": Pair(frozenset(names)),
    }


@given(_names, _names)
def test_equal_sets_are_stored_alike_and_read_back_equal(
    names: list[str], marks: list[str]
) -> None:
    schema = StateSchema.of(Sets)
    first, second = _two_orders(names)
    one_marks, other_marks = _two_orders(marks)
    one = schema.values_to_json(_values(first, one_marks))
    other = schema.values_to_json(_values(second, other_marks))
    assert one == other
    assert one["names"] == sorted(names)
    assert one["nested"] == [{"k": sorted(names)}]
    assert one["leaves"] == sorted(one["leaves"], key=orjson.dumps)  # by their JSON text
    assert {k: schema.fields[k].dump(v) for k, v in _values(first, one_marks).items()} == one
    assert schema.values_from_json(one) == schema.values_from_json(other)
    assert schema.values_from_json(one)["names"] == set(names)


@given(_names)
def test_a_task_input_model_with_sets_is_stored_alike(names: list[str]) -> None:
    first, second = _two_orders(names)
    leaf = Leaf(leafName="x", marks=frozenset(first))
    one = model_json_form(Holder(leaf=leaf, names=first), "The input")
    other = model_json_form(
        Holder(leaf=Leaf(leafName="x", marks=frozenset(second)), names=second), "The input"
    )
    assert one == other == {"leaf": {"name": "x", "marks": sorted(names)}, "names": sorted(names)}


def test_numbers_in_a_set_are_stored_in_numeric_order() -> None:
    spec = StateSchema.of(Sets).fields["numbers"]
    assert spec.to_json({10, -2.5, 3, 2**40, 0.5}) == [-2.5, 0.5, 3, 10, 2**40]


class Scored(BaseModel):
    tags: set[str]
    score: float | None = None


def test_a_set_beside_a_null_float_is_stored_in_order_and_not_refused() -> None:
    # A float field's null makes to_json read its encoding back and compare it with the
    # dump: that comparison is with the dump as encoded, before its sets are put in order.
    class Docs(BaseState):
        doc: Scored | None = None

    names = [f"t{i}" for i in range(30)]
    first, second = _two_orders(names)
    spec = StateSchema.of(Docs).fields["doc"]
    one = spec.to_json(Scored(tags=first))
    assert one == spec.to_json(Scored(tags=second)) == {"tags": sorted(names), "score": None}
    assert spec.from_json(one) == Scored(tags=set(names))


def test_fields_that_cannot_hold_a_set_skip_the_ordering() -> None:
    class Plain(BaseState):
        words: list[str] = Field(default_factory=list)
        by_name: dict[str, Leaf] = Field(default_factory=dict)  # a model with a set field

    fields = StateSchema.of(Plain).fields
    assert not fields["words"].sets
    assert fields["by_name"].sets
    assert all(StateSchema.of(Sets).fields[name].sets for name in ("names", "leaves", "pair"))


class Shown(BaseModel):
    tags: set[str]

    @field_serializer("tags")
    def _as_text(self, tags: set[str]) -> str:
        return "|".join(sorted(tags))


def test_a_set_a_serializer_turns_into_something_else_is_stored_as_the_serializer_says() -> None:
    shown = Shown(tags={"b", "a"})
    data = shown.model_dump(mode="json")
    assert sets_in_order(shown, data, by_alias=True) == {"tags": "a|b"}
    assert sets_in_order({"a", "b"}, ["a"], by_alias=True) == ["a"]  # not its mirror: kept
