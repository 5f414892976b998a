"""``update_state`` on a parent whose subgraph is paused changes the parent's state, and the
edit stays when the child resumes: the child writes back what it changed since its input,
laid over the parent's state as it is then, as a plain node's update would be."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    Resume,
    add,
    interrupt,
    node,
    subgraph,
)


class Desk(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""
    owner: str = ""


@node
def ask(state: Desk) -> dict[str, object]:
    answer = interrupt("who?", id="who")
    return {"log": [f"asked:{answer}"], "owner": answer}


@node
def after(state: Desk) -> dict[str, object]:
    return {"log": ["after"]}


class Narrow(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def ask_narrow(state: Narrow) -> dict[str, object]:
    return {"log": [f"asked:{interrupt('who?', id='who')}"]}


def _paused_then_edited(parent: Graph) -> Desk:
    parent.invoke({"log": ["start"]}, thread_id="t")
    parent.update_state_sync("t", {"log": ["edited"], "note": "urgent", "owner": "bea"})
    result = parent.invoke(None, thread_id="t", resume=Resume("ada"))
    assert result.status == "completed"
    return result.state


def test_an_edit_of_the_parent_while_the_child_is_paused_stays() -> None:
    child = Graph(Desk, name="child").flow(START >> ask, ask >> END)
    parent = Graph(Desk, state_store=InMemoryStateStore()).flow(
        START >> child, child >> after, after >> END
    )
    state = _paused_then_edited(parent)
    # 'note' the child never changed keeps the edit; 'owner' the child set wins, as a
    # node's write after an edit does; the list keeps the edit's item and the child's.
    assert (state.note, state.owner) == ("urgent", "ada")
    assert state.log == ["start", "edited", "asked:ada", "after"]


def test_an_edit_stays_with_shared_fields_of_another_state_class() -> None:
    child = Graph(Narrow, name="child").flow(START >> ask_narrow, ask_narrow >> END)
    node_ = subgraph("child", child, share=["log"])
    parent = Graph(Desk, state_store=InMemoryStateStore()).flow(
        START >> node_, node_ >> after, after >> END
    )
    state = _paused_then_edited(parent)
    assert state.log == ["start", "edited", "asked:ada", "after"]
    assert (state.note, state.owner) == ("urgent", "bea")


def test_without_an_edit_the_child_writes_back_what_it_changed() -> None:
    child = Graph(Desk, name="child").flow(START >> ask, ask >> END)
    parent = Graph(Desk, state_store=InMemoryStateStore()).flow(
        START >> child, child >> after, after >> END
    )
    parent.invoke({"log": ["start"], "note": "n"}, thread_id="t")
    state = parent.invoke(None, thread_id="t", resume=Resume("ada")).state
    assert (state.log, state.note, state.owner) == (["start", "asked:ada", "after"], "n", "ada")
