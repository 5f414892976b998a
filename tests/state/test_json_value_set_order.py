"""``to_json_value`` lists a set's items in one order, whatever the process's hash seed.

It makes the stored form of interrupt payloads, resume answers and ``ctx.cache`` (and the
state ``nodestep serve`` returns), where a set's iteration order would follow
``PYTHONHASHSEED``. Within one process, two equal sets built in different orders stand for
two processes: strings that meet in one hash slot iterate in the order they were added.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, RootModel

from nodestep import BaseState
from nodestep._state.schema import StateSchema
from nodestep.state import to_json_value

STORE = """
import sys
from nodestep import END, START, BaseState, FilesystemStateStore, Graph, NodeContext, node
from nodestep import Resume, interrupt
from nodestep.testing import sequential_ids, ticking_clock


class Plain(BaseState):
    answer: list[str] = []


@node
def ask(state: Plain, ctx: NodeContext) -> dict:
    ctx.cache["seen"] = {f"seen{i}" for i in range(20)}
    answer = interrupt({"tags": {f"tag{i}" for i in range(20)}, "n": {300, -7, 2**40}}, id="q")
    return {"answer": sorted(answer)}


store = FilesystemStateStore(sys.argv[1])
graph = Graph(Plain, state_store=store, id_factory=sequential_ids(), clock=ticking_clock())
graph = graph.flow(START >> ask, ask >> END)
graph.invoke({}, thread_id="t")
graph.invoke(None, thread_id="t", resume=Resume({f"yes{i}" for i in range(20)}))
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
def test_processes_with_different_hash_seeds_store_sets_in_payloads_as_the_same_bytes(
    tmp_path: Path,
) -> None:
    one = _stored_under("1", tmp_path / "one")
    other = _stored_under("2", tmp_path / "other")
    assert one == other
    assert b'"tags":["tag0","tag1","tag10","tag11"' in one  # the interrupt's payload
    assert b'"n":[-7,300,1099511627776]' in one
    assert b'"seen":["seen0","seen1","seen10"' in one  # ctx.cache, stored with the pause
    assert b'["yes0","yes1","yes10"' in one  # the resume answer


def _two_orders(names: list[str]) -> tuple[set[str], set[str]]:
    """Two equal sets of ``names``, built in opposite orders."""
    first: set[str] = set()
    for name in names:
        first.add(name)
    second: set[str] = set()
    for name in reversed(names):
        second.add(name)
    return first, second


class Typed(BaseModel):
    names: set[str]


class Loose(BaseModel):
    extra: dict[str, Any] = {}


@dataclass
class Box:
    inside: Any


class Pair(NamedTuple):
    left: Any
    right: int


def _payload(names: set[str]) -> dict[str, Any]:
    return {
        "plain": names,
        "frozen": [frozenset(names)],
        "typed": Typed(names=names),
        "loose": Loose(extra={"k": names}),  # a set where the model takes anything
        "box": Box(inside=(names,)),
        "pair": Pair(names, 1),
        "nested": {"sets": {frozenset(names)} if names else set()},
    }


_names = st.lists(st.text(max_size=4), unique=True, max_size=12)


@given(_names)
def test_equal_sets_give_the_same_json_data_in_sorted_order(names: list[str]) -> None:
    first, second = _two_orders(names)
    one, other = to_json_value(_payload(first)), to_json_value(_payload(second))
    assert one == other
    ordered = sorted(names)
    assert one["plain"] == one["frozen"][0] == one["typed"]["names"] == ordered
    assert one["loose"] == {"extra": {"k": ordered}}
    assert one["box"] == {"inside": [ordered]}
    assert one["pair"] == [ordered, 1]
    assert one["nested"] == {"sets": [ordered] if names else []}


def test_numbers_in_a_set_are_listed_in_numeric_order() -> None:
    assert to_json_value({10, -2.5, 3, 2**40, 0.5}) == [-2.5, 0.5, 3, 10, 2**40]


def test_a_value_without_sets_keeps_its_json_form() -> None:
    value = {"b": [1, (2, 3)], "a": Typed(names=set()), "c": None, "d": Pair("x", 2)}
    data = to_json_value(value)
    assert data == {"b": [1, [2, 3]], "a": {"names": []}, "c": None, "d": ["x", 2]}
    assert list(data) == ["b", "a", "c", "d"]  # a dict keeps its order


class Tags(RootModel[set[str]]):
    pass


class Tagged(BaseState):
    tags: Tags = Tags(set())


def test_a_root_model_of_a_set_is_listed_in_order_in_a_payload_and_in_a_state() -> None:
    names = [f"t{i}" for i in range(30)]
    first, second = _two_orders(names)
    assert to_json_value({"k": Tags(first)}) == to_json_value({"k": Tags(second)})
    assert to_json_value(Tags(first)) == sorted(names)
    spec = StateSchema.of(Tagged).fields["tags"]
    assert spec.to_json(Tags(first)) == spec.to_json(Tags(second)) == sorted(names)
    assert spec.dump(Tags(first)) == sorted(names)
