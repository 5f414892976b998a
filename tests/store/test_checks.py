"""The record checks: the quick answer for plain records agrees with the general check, and
what the checks let a store write, the file's reader accepts."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import StateStoreError
from nodestep.store import BranchRecord, _checks, _codec, check_branch
from nodestep.store._index import RecordIndex

# A value of each kind a key may wrongly hold, and the reserved type names.
WRONG = [
    None,
    True,
    False,
    0,
    7,
    -1,
    0.5,
    math.nan,
    math.inf,
    "",
    "x",
    "header",
    "branch",
    "batch",
    [],
    {},
]
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


@pytest.mark.slow
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


# -- what the write check accepts, every reader accepts -------------------------------------


def test_a_ts_that_is_not_finite_is_refused_by_both_checks() -> None:
    for ts in (math.nan, math.inf, -math.inf):
        record = {**GOOD, "ts": ts}
        assert not _checks._plain_event(record)
        assert _checks.problem(record, _checks.EVENT_KEYS) == (
            f"its 'ts' must be a finite number, found {ts!r}"
        )
    assert _checks.problem({**GOOD, "ts": 10**30}, _checks.EVENT_KEYS) is None


def _read_back(line: bytes, index: RecordIndex | None = None) -> str | None:
    """Index ``line`` as the file store's reader does; return what it finds wrong, or None."""
    parsed: Any = _codec.parse_line(line, 0, len(line) - 1)
    record = parsed[0] if isinstance(parsed, tuple) else parsed  # (record, has a checksum)
    found: str | None = (index or RecordIndex()).add_stored(record, (0, len(line)))
    return found


odd = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(), st.text(max_size=3))


@settings(max_examples=300)
@given(
    ts=st.one_of(st.floats(), st.integers(-(2**70), 2**70), odd),
    seq=st.one_of(st.integers(0, 3), odd),
)
def test_an_event_the_check_accepts_is_one_the_file_reader_accepts(ts: Any, seq: Any) -> None:
    record = {**GOOD, "ts": ts, "seq": seq}
    try:
        (line,) = _checks.encode_events("t1", "main", [record], 1)
    except StateStoreError:
        return
    assert _read_back(line) is None


@settings(max_examples=300)
@given(
    thread=st.one_of(st.just("t1"), odd),
    parent=st.one_of(st.just("main"), odd),
    from_event=st.one_of(st.just("e1"), odd),
    from_seq=st.one_of(st.integers(-2, 3), st.integers(2**64, 2**65), odd),
    created=st.one_of(st.floats(), odd),
)
def test_a_branch_the_check_accepts_is_one_the_file_reader_accepts(
    thread: Any, parent: Any, from_event: Any, from_seq: Any, created: Any
) -> None:
    branch = BranchRecord("alt", thread, parent, from_event, from_seq, created)
    first_seq = from_seq + 1 if type(from_seq) is int else 1
    first = [{**GOOD, "thread": thread, "branch": "alt", "seq": first_seq, "type": "checkpoint"}]
    try:
        lines = _checks.encode_branch(branch, first)
    except StateStoreError as error:  # about the branch record, or about its first record
        assert "of thread" in str(error) and "Nothing was stored" in str(error)
        return
    index = RecordIndex()
    for line in lines:
        assert _read_back(line, index) is None


def test_check_branch_refuses_a_branch_without_its_fork_event() -> None:
    branch = BranchRecord("alt", "t1", "main", None, 2, 1.0)  # type: ignore[arg-type]
    first = [{**GOOD, "branch": "alt", "seq": 3, "type": "checkpoint"}]
    with pytest.raises(
        StateStoreError,
        match=r"Cannot create branch 'alt' of thread 't1': in its record "
        r"\(BranchRecord\.to_json\(\)\), its 'from_event' must be a string, found None\. "
        r"Nothing was stored\.",
    ):
        check_branch(branch, first)
    check_branch(dataclasses.replace(branch, from_event_id="e1"), first)
