"""A field's plain default is the same value in a live run and after a load from a store.

pydantic leaves a default unvalidated: ``x: float = 0`` is the int ``0`` on an instance,
while ``x=0`` validates to the float ``0.0``. A store keeps the default's JSON form and a
load validates it, so the state holds the default as a load reads it back, from the
start: ``0.0``, the float every write of the field gives too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from nodestep import END, START, BaseState, Graph, SQLiteStateStore, node


class Totals(BaseState):
    x: float = 0  # an int default, as the numeric tower allows and users write it
    n: int = 0


@node
def count(state: Totals) -> dict[str, Any]:
    return {"n": state.n + 1}


def _graph(store: SQLiteStateStore | None = None) -> Graph[Totals]:
    return Graph(Totals, state_store=store).flow(START >> count, count >> END)


def test_a_float_fields_int_default_is_live_the_float_a_load_gives_back(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    store = SQLiteStateStore(path)
    live = _graph(store).invoke({}, thread_id="t").state.x
    anyio.run(store.aclose)
    reopened = SQLiteStateStore(path)  # no cache of the live run: a load from the file
    back = _graph(reopened).get_state_sync("t").value.x
    anyio.run(reopened.aclose)
    without_store = _graph().invoke({}).state.x
    assert [repr(v) for v in (live, back, without_store)] == ["0.0"] * 3
    assert repr(_graph().invoke({"x": 0}).state.x) == "0.0"  # as a write of 0 gives
