"""Forgetting ``await`` on a thread method never silently does the wrong thing: ``exists``,
``update_state`` and ``fork`` explain themselves and name their ``_sync`` forms."""

from __future__ import annotations

import asyncio
import gc

import anyio
import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node


class S(BaseState):
    n: int = 0


@node
def bump(state: S) -> dict:
    return {"n": state.n + 1}


def stored_graph() -> Graph[S]:
    graph = Graph(S, state_store=InMemoryStateStore()).flow(START >> bump, bump >> END)
    graph.invoke({}, thread_id="t")
    return graph


def test_exists_without_await_in_a_condition_is_a_type_error_naming_the_sync_form() -> None:
    graph = stored_graph()
    pending = graph.exists("missing")
    with pytest.raises(
        TypeError, match=r"write 'await graph\.exists\(\.\.\.\)'.*graph\.exists_sync"
    ):
        bool(pending)
    pending.close()


@pytest.mark.slow
def test_update_state_without_await_warns_that_it_did_nothing() -> None:
    graph = stored_graph()
    with pytest.warns(RuntimeWarning, match=r"graph\.update_state\(\.\.\.\) is async.*did nothing"):
        graph.update_state("t", {"n": 99})
        gc.collect()
    assert graph.load_sync("t") == {"n": 1}


def test_the_result_of_fork_without_await_explains_itself() -> None:
    graph = stored_graph()
    pending = graph.fork("t", from_="nowhere")
    with pytest.raises(AttributeError, match=r"graph\.fork_sync\(\.\.\.\).*attribute 'id'"):
        pending.id  # noqa: B018
    pending.close()


def test_awaited_they_are_the_methods_on_asyncio_run_and_on_both_back_ends() -> None:
    graph = stored_graph()
    assert asyncio.run(graph.exists("t")) is True
    event_id = asyncio.run(graph.update_state("t", {"n": 5}))
    assert graph.history_sync("t").events[-1].id == event_id

    async def main(name: str) -> tuple[bool, str]:
        branch = await graph.fork("t", from_=event_id, name=name)
        return await graph.exists("t", branch_id=branch.id), branch.parent_id

    for backend in ("asyncio", "trio"):
        assert anyio.run(main, f"on-{backend}", backend=backend) == (True, "main")


@pytest.mark.slow
def test_a_closed_call_never_runs_and_does_not_warn() -> None:
    graph = stored_graph()
    pending = graph.update_state("t", {"n": 7})
    pending.close()
    del pending
    gc.collect()
    assert graph.load_sync("t") == {"n": 1}
