"""A datetime's zone is not stored, as docs/state.md says: only its UTC offset is.

The stored form is pydantic's ISO 8601 text, which holds an offset, not a zone; a datetime
with a ``ZoneInfo`` reads back from the store as the same instant at a fixed offset. This
pins that documented behaviour, so a change to it is a decision, not an accident.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node


class Meeting(BaseState):
    starts: datetime | None = None


@node
def keep(state: Meeting) -> dict[str, Any]:
    return {}


def _graph(store: InMemoryStateStore) -> Graph[Meeting]:
    return Graph(Meeting, state_store=store).flow(START >> keep, keep >> END)


def test_a_zoneinfo_datetime_reads_back_as_the_same_instant_at_a_fixed_offset() -> None:
    store = InMemoryStateStore()
    paris = datetime(2026, 3, 28, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))
    _graph(store).invoke({"starts": paris}, thread_id="m")
    back = _graph(store).get_state_sync("m").value.starts  # a new graph: read from the store
    assert back == paris and str(back) == str(paris)
    assert not isinstance(back.tzinfo, ZoneInfo)
    assert back.utcoffset() == timedelta(hours=1)
    # The zone is gone: a day later keeps +01:00, where Paris is at +02:00 by then.
    assert (back + timedelta(days=1)).utcoffset() == timedelta(hours=1)
    again = back.astimezone(ZoneInfo("Europe/Paris")) + timedelta(days=1)
    assert again.utcoffset() == timedelta(hours=2)
