"""``fork`` and ``branches`` with ``branch_id=``: forks of forks, and the forks of one branch."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    Resume,
    ResumeError,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)


@node
def tally(state: Poll) -> dict:
    return {}


def poll_graph(store: StateStore) -> Graph[Poll]:
    return Graph(Poll, state_store=store).flow(START >> tally, tally >> END)


async def test_a_fork_of_a_fork_starts_at_the_given_branchs_event(store: StateStore) -> None:
    graph = poll_graph(store)
    first = await graph.ainvoke({"votes": ["a"]}, thread_id="p")
    await graph.fork("p", from_=first.checkpoint_id, name="x", branch_id="main")
    on_x = await graph.ainvoke({"votes": ["x"]}, thread_id="p", branch_id="x")
    fork = await graph.fork("p", from_=on_x.checkpoint_id, name="y", branch_id="x")
    assert (fork.parent_id, fork.from_event_id) == ("x", on_x.checkpoint_id)
    assert (await graph.load("p", branch_id="y"))["votes"] == ["a", "x"]


async def test_fork_refuses_an_event_of_another_branch_naming_its_branch(
    store: StateStore,
) -> None:
    graph = poll_graph(store)
    first = await graph.ainvoke({"votes": ["a"]}, thread_id="p")
    await graph.fork("p", from_=first.checkpoint_id, name="x")
    with pytest.raises(
        UnknownThreadError, match=r"is on branch 'main', not on branch 'x'\. Pass branch_id='main'"
    ) as caught:
        await graph.fork("p", from_=first.checkpoint_id, name="y", branch_id="x")
    assert (caught.value.thread_id, caught.value.branch_id) == ("p", "x")
    assert [b.id for b in await graph.branches("p")] == ["x"]


async def test_fork_of_an_unknown_thread_or_branch_raises_unknown_thread_error(
    store: StateStore,
) -> None:
    graph = poll_graph(store)
    first = await graph.ainvoke({}, thread_id="p")
    with pytest.raises(UnknownThreadError, match=r"^Thread 'p' has no history on branch 'typo'"):
        await graph.fork("p", from_=first.checkpoint_id, branch_id="typo")
    with pytest.raises(UnknownThreadError, match=r"^Thread 'nobody' has no history"):
        await graph.fork("nobody", from_=first.checkpoint_id, branch_id="main")


async def test_branches_of_a_branch_are_the_forks_made_from_it(store: StateStore) -> None:
    graph = poll_graph(store)
    first = await graph.ainvoke({}, thread_id="p")
    await graph.fork("p", from_=first.checkpoint_id, name="x")
    on_x = await graph.ainvoke({}, thread_id="p", branch_id="x")
    await graph.fork("p", from_=on_x.checkpoint_id, name="x1", branch_id="x")
    await graph.fork("p", from_=first.checkpoint_id, name="m2")
    assert [b.id for b in await graph.branches("p")] == ["x", "x1", "m2"]
    assert [b.id for b in await graph.branches("p", branch_id="main")] == ["x", "m2"]
    assert [b.id for b in await graph.branches("p", branch_id="x")] == ["x1"]
    assert await graph.branches("p", branch_id="x1") == []


async def test_branches_of_an_unknown_thread_or_branch_raise(store: StateStore) -> None:
    graph = poll_graph(store)
    await graph.ainvoke({}, thread_id="p")
    with pytest.raises(UnknownThreadError, match=r"^Thread 'nobody' has no history"):
        await graph.branches("nobody")
    with pytest.raises(UnknownThreadError, match=r"^Thread 'p' has no history on branch 'typo'"):
        await graph.branches("p", branch_id="typo")


def test_the_sync_forms_take_branch_id_too() -> None:
    graph = poll_graph(InMemoryStateStore())
    first = graph.invoke({}, thread_id="p")
    graph.fork_sync("p", from_=first.checkpoint_id, name="x", branch_id="main")
    on_x = graph.invoke({}, thread_id="p", branch_id="x")
    graph.fork_sync("p", from_=on_x.checkpoint_id, name="x1", branch_id="x")
    assert [b.id for b in graph.branches_sync("p", branch_id="x")] == ["x1"]
    assert [b.id for b in graph.branches_sync("p")] == ["x", "x1"]
    with pytest.raises(UnknownThreadError, match="on branch 'typo'"):
        graph.branches_sync("p", branch_id="typo")


@node
def ask(state: Poll) -> dict:
    return {"votes": [str(interrupt("which?", id="which"))]}


async def test_a_resume_error_on_a_forked_branch_names_the_branch(store: StateStore) -> None:
    # Each branch has its own status: naming only the thread points the reader at main.
    graph = Graph(Poll, state_store=store).flow(START >> ask, ask >> END)
    paused = await graph.ainvoke({}, thread_id="p")
    await graph.fork("p", from_=paused.checkpoint_id, name="recount")
    with pytest.raises(ResumeError) as caught:
        await graph.ainvoke({"votes": ["x"]}, thread_id="p", branch_id="recount")
    assert str(caught.value).startswith(
        "Thread 'p' (branch 'recount') is paused, waiting for answers to 'ask:which'."
    )
    assert caught.value.pending == ("ask:which",)
    with pytest.raises(
        ResumeError,
        match=r"^Resume answers 'nope', which is not pending on "
        r"thread 'p' \(branch 'recount'\)",
    ):
        await graph.ainvoke(
            None, thread_id="p", branch_id="recount", resume=Resume(answers={"nope": 1})
        )
    done = await graph.ainvoke(None, thread_id="p", branch_id="recount", resume=Resume("b"))
    assert done.state.votes == ["b"]
    with pytest.raises(
        ResumeError, match=r"^Thread 'p' \(branch 'recount'\) has no unfinished superstep"
    ):
        await graph.ainvoke(None, thread_id="p", branch_id="recount")
    with pytest.raises(ResumeError, match=r"^Thread 'p' is paused"):  # main: no branch named
        await graph.ainvoke({"votes": ["x"]}, thread_id="p")
