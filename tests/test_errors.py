"""Every nodestep error survives pickling and copying: type, message and attributes.

Errors cross process boundaries (a graph run in a ``ProcessPoolExecutor`` sends its error
back pickled) and get copied by frameworks; an error whose ``__init__`` takes other
arguments than its message used to break both.
"""

from __future__ import annotations

import copy
import inspect
import multiprocessing
import pickle
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import nodestep
from nodestep import (
    START,
    BaseState,
    Graph,
    InternalError,
    NodestepError,
    RunLimitExceededError,
    ThreadConflictError,
    node,
)
from nodestep import (
    _errors as errors,
)


def _exported_errors() -> list[type[NodestepError]]:
    names = set(nodestep.__all__) | set(errors.__all__)
    found = {getattr(nodestep, n, None) or getattr(errors, n) for n in names}
    classes = [c for c in found if isinstance(c, type) and issubclass(c, NodestepError)]
    return sorted(classes, key=lambda c: c.__name__)


ERRORS = _exported_errors()


def _has_own_init(cls: type[BaseException]) -> bool:
    return any("__init__" in vars(k) for k in cls.__mro__ if k.__module__.startswith("nodestep"))


def _instances(cls: type[NodestepError]) -> st.SearchStrategy[NodestepError]:
    if _has_own_init(cls):
        # Hypothesis fills every parameter of ``__init__`` from its annotation.
        return st.builds(cls)
    return st.builds(cls, st.text())


def _same(a: BaseException, b: BaseException) -> None:
    assert type(b) is type(a)
    assert str(b) == str(a)
    assert b.args == a.args
    # repr, not ==: a float attribute may be nan, which equals nothing.
    assert repr(vars(b)) == repr(vars(a))


ROUND_TRIPS: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda e: pickle.loads(pickle.dumps(e)),
    "pickle protocol 0": lambda e: pickle.loads(pickle.dumps(e, protocol=0)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


def test_the_error_list_covers_the_whole_tree():
    assert {c.__name__ for c in ERRORS} == set(errors.__all__)
    assert len(ERRORS) >= 14


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_every_error_survives_pickle_and_copy_with_message_and_attributes(
    cls: type[NodestepError], how: str, data: st.DataObject
):
    error = data.draw(_instances(cls))
    error.add_note("a note added on the way")
    back = ROUND_TRIPS[how](error)
    _same(error, back)
    assert back.__notes__ == ["a note added on the way"]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_keeps_working_after_being_copied_twice(cls: type[NodestepError]):
    error = _one(cls)
    twice = copy.deepcopy(pickle.loads(pickle.dumps(copy.copy(error))))
    _same(error, twice)
    with pytest.raises(cls, match=re.escape(str(error))):
        raise twice


def _one(cls: type[NodestepError]) -> NodestepError:
    """Build an instance with plain values, by parameter name."""
    if not _has_own_init(cls):
        return cls("something went wrong")
    values = {
        "message": "something went wrong",
        "problems": ["first problem"],
        "max_steps": 3,
        "node": "worker",
        "timeout": 0.5,
        "field": "count",
        "writer": "worker",
        "writers": ["a", "b"],
        "step": 2,
        "pending": ["ask"],
        "thread_id": "t1",
        "failures": [],
        "branch_id": "main",
        "path": "/tmp/history.jsonl",
        "line": 4,
        "offset": 120,
        "expected": 5,
        "found": 7,
        "stored": "This call stored events 3 to 5 before, and they stay.",
        "holder": "run-1",
        "expires": 1_700_000_030.0,
        "pid": 4242,
        "host": "box",
        "waited": 1.5,
        "lost": False,
        "fix": "Call update_state again once the thread is free.",
        "model": "gpt-test",
        "status": 429,
        "retryable": True,
        "retry_after": 2.5,
        "role": "billing",
        "text": "count < 'three'",
        "file": "specs/graph.yaml",
        "column": 7,
        "server": "files",
        "tool": "read",
        "where": "/properties/path",
        "timed_out": True,
        "rule": "path",
    }
    params = inspect.signature(cls).parameters
    args = [values[p] for p, v in params.items() if v.kind is v.POSITIONAL_OR_KEYWORD]
    kwargs = {p: values[p] for p, v in params.items() if v.kind is v.KEYWORD_ONLY}
    return cls(*args, **kwargs)


def test_internal_error_copies_keep_one_prefix():
    error = InternalError("the plan lost a task")
    for how, trip in ROUND_TRIPS.items():
        assert str(trip(trip(error))) == str(error), how
    assert str(error).count("internal error") == 1


# -- across processes --------------------------------------------------------------------


class Loop(BaseState):
    count: int = 0


@node
def again(state: Loop) -> dict[str, int]:
    return {"count": state.count + 1}


def _run_forever() -> None:
    Graph(Loop, name="loop", max_steps=3).flow(START >> again, again >> again).invoke({})


def _conflict() -> None:
    raise ThreadConflictError("t1", "main", 5, 7)


@pytest.mark.slow
def test_errors_raised_in_a_worker_process_reach_the_parent_intact():
    # spawn: the child imports this module afresh, as on macOS and Windows.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(RunLimitExceededError, match="max_steps") as limit:
            pool.submit(_run_forever).result()
        with pytest.raises(ThreadConflictError, match="changed by another writer") as conflict:
            pool.submit(_conflict).result()
    assert limit.value.max_steps == 3
    assert (conflict.value.thread_id, conflict.value.expected, conflict.value.found) == (
        "t1",
        5,
        7,
    )
