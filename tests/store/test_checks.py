"""The record checks: the quick answer for plain records agrees with the general check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep.store import _checks

# A value of each kind a key may wrongly hold, and the reserved type names.
WRONG = [None, True, False, 0, 7, -1, 0.5, "", "x", "header", "branch", "batch", [], {}]
values = st.sampled_from(WRONG)
GOOD = {"id": "e1", "seq": 1, "ts": 0.5, "thread": "t1", "branch": "main", "type": "x"}


@st.composite
def near_good(draw: st.DrawFn) -> dict[str, Any]:
    """A good event record with a few keys changed or removed."""
    record = dict(GOOD)
    for key in draw(st.lists(st.sampled_from(sorted(GOOD)), max_size=2, unique=True)):
        if draw(st.booleans()):
            record[key] = draw(values)
        else:
            record.pop(key, None)
    return record


records = st.one_of(
    near_good(),
    st.dictionaries(st.sampled_from(sorted(GOOD)), values),
    st.lists(values, max_size=2),
)


def general(record: Any) -> str | None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_checks, "_plain_event", lambda record: False)
        return _checks.problem(record, _checks.EVENT_KEYS)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_each_key_changed_or_missing_gets_the_general_answer(key: str) -> None:
    missing = {k: v for k, v in GOOD.items() if k != key}
    for record in [missing, *({**GOOD, key: value} for value in WRONG)]:
        assert _checks.problem(record, _checks.EVENT_KEYS) == general(record), record


class Id(str):
    pass


@settings(max_examples=200)
@given(record=records)
def test_the_quick_check_accepts_only_what_the_general_check_accepts(record: Any) -> None:
    assert _checks.problem(record, _checks.EVENT_KEYS) == general(record)


def test_values_of_subclasses_go_to_the_general_check() -> None:
    record = {**GOOD, "id": Id("e1")}
    assert not _checks._plain_event(record)
    assert _checks.problem(record, _checks.EVENT_KEYS) is None
    assert "'seq' must be an integer, found True" in str(
        _checks.problem({**record, "seq": True}, _checks.EVENT_KEYS)
    )
