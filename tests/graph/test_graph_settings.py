"""A graph's settings are fixed when it is built, and every way to run it takes the same
options (``RunOptions``); ids and the clock can be given, for repeatable histories."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    RunOptions,
    node,
)
from nodestep.testing import sequential_ids, ticking_clock


class S(BaseState):
    n: int = 0


@node
def bump(state: S) -> dict:
    return {"n": state.n + 1}


def graph(**settings: Any) -> Graph[S]:
    return Graph(S, **settings).flow(START >> bump, bump >> END)


def test_the_options_are_one_typed_dict_of_every_run_keyword() -> None:
    assert set(RunOptions.__annotations__) == {
        "thread_id",
        "branch_id",
        "resume",
        "context",
        "state_store",
        "interrupt_before",
        "interrupt_after",
        "request_key",
        "wait_for_thread",
        "credentials",
        "memory",
        "max_steps",
    }


@pytest.mark.parametrize("method", ["invoke", "stream"])
def test_a_misspelt_option_is_a_type_error_naming_the_closest_one(method: str) -> None:
    call = getattr(graph(), method)
    kwargs: dict[str, Any] = {"thred_id": "t"}
    if method == "stream":
        kwargs["stream_mode"] = "updates"
    expected = rf"{method}\(\) got an unexpected keyword argument 'thred_id'\."
    with pytest.raises(TypeError, match=expected + r" Did you mean 'thread_id'\?"):
        call({}, **kwargs)


def test_an_unknown_option_with_nothing_close_lists_every_option() -> None:
    listed = "It takes: branch_id, context, credentials, interrupt_after"
    with pytest.raises(TypeError, match=listed) as caught:
        graph().invoke({}, colour="red")  # type: ignore[call-arg]
    assert "Did you mean" not in str(caught.value)


@pytest.mark.anyio
async def test_the_async_ways_to_run_check_options_too() -> None:
    with pytest.raises(
        TypeError, match=r"ainvoke\(\) got an unexpected keyword argument 'stat_store'"
    ):
        await graph().ainvoke({}, stat_store=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"astream\(\) got an unexpected keyword argument 'resum'"):
        graph().astream({}, stream_mode=[], resum=None)  # type: ignore[call-arg]


def test_settings_are_read_only_after_the_graph_is_built() -> None:
    built = graph(max_steps=7, name="g")
    assert (built.max_steps, built.name, built.timeout) == (7, "g", None)
    for attribute in ("max_steps", "name", "timeout", "state_store", "interrupt_before"):
        with pytest.raises(AttributeError, match="has no setter"):
            setattr(built, attribute, None)


def test_injected_ids_and_clock_stamp_every_record() -> None:
    store = InMemoryStateStore()
    built = graph(state_store=store, id_factory=sequential_ids(), clock=ticking_clock(10.0))
    result = built.invoke({}, thread_id="t")
    events = built.history_sync("t").events
    assert [e.id for e in events] == [
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
        "00000000-0000-4000-8000-000000000004",
        "00000000-0000-4000-8000-000000000005",
    ]
    assert result.run_id == "00000000000040008000000000000001"
    # One clock reading per append: the opening records share one, and so do the last
    # superstep and run_completed, which the run stores in one append.
    assert [e.timestamp for e in events] == [10.0, 10.0, 11.0, 11.0]


def test_a_generated_thread_id_and_a_fork_name_come_from_the_id_factory() -> None:
    store = InMemoryStateStore()
    built = graph(id_factory=sequential_ids(500))
    assert built.invoke({}).thread_id == "00000000000040008000000000000500"
    forked = graph(state_store=store, id_factory=sequential_ids(900))
    result = forked.invoke({}, thread_id="t")
    assert result.checkpoint_id is not None
    first = forked.fork_sync("t", from_=result.checkpoint_id).id
    second = forked.fork_sync("t", from_=result.checkpoint_id).id
    assert (first, second) == ("000000000905", "000000000907")


@pytest.mark.parametrize("setting", ["id_factory", "clock"])
def test_an_id_factory_or_clock_that_cannot_be_called_is_refused(setting: str) -> None:
    with pytest.raises(
        GraphConfigError, match=f"{setting} must be a function taking no arguments, got str"
    ):
        Graph(S, **{setting: "not callable"})
