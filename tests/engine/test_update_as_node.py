"""``update_state(..., as_node=...)``: an edit recorded as written by a node, whose routes the
thread then follows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    InvalidUpdateError,
    ResumeError,
    UnknownThreadError,
    add,
    branch,
    interrupt,
    node,
    when,
)
from nodestep.store import StateStore
from store_helpers import open_file


class Doc(BaseState):
    text: str = ""
    approved: bool = False
    route: str = "send"
    sent: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


def doc_graph(calls: Counter[str], store: StateStore, **settings: object) -> Graph[Doc]:
    """draft >> review >> when(approved: send, else: redo)."""

    @node
    def draft(state: Doc) -> dict:
        calls["draft"] += 1
        return {"text": "hello", "log": ["draft"]}

    @node
    def review(state: Doc) -> dict:
        calls["review"] += 1
        return {"approved": False, "log": ["review"]}

    @node
    def send(state: Doc) -> dict:
        calls["send"] += 1
        return {"sent": state.text, "log": ["send"]}

    @node
    def redo(state: Doc) -> dict:
        calls["redo"] += 1
        return {"text": state.text + "!", "log": ["redo"]}

    graph = Graph(Doc, state_store=store, **settings)  # type: ignore[arg-type]
    return graph.flow(
        START >> draft,
        draft >> review,
        review >> when(lambda s: s.approved, send, otherwise=redo),
        send >> END,
        redo >> END,
    )


def test_on_a_completed_thread_the_flow_continues_from_the_nodes_when_route(
    store: StateStore,
) -> None:
    calls: Counter[str] = Counter()
    graph = doc_graph(calls, store)
    graph.invoke({}, thread_id="t")
    assert calls == Counter(draft=1, review=1, redo=1)
    graph.update_state_sync("t", {"approved": True}, as_node="review")
    snapshot = graph.get_state_sync("t")
    assert (snapshot.status, snapshot.next, snapshot.value.approved) == ("running", ("send",), True)
    result = graph.invoke(None, thread_id="t")
    assert (result.status, result.state.sent) == ("completed", "hello!")
    assert calls == Counter(draft=1, review=1, redo=1, send=1)


def test_the_update_is_recorded_as_written_by_the_node_with_its_routes() -> None:
    graph = doc_graph(Counter(), InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"approved": True}, as_node="review")
    event = graph.history_sync("t").events[-1]
    assert (event.type, event.data) == (
        "state_updated",
        {"values": {"approved": True}, "node": "review", "routes": ["send"]},
    )


def test_a_reopened_store_continues_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    calls: Counter[str] = Counter()
    doc_graph(calls, open_file(path)).invoke({}, thread_id="t")
    doc_graph(calls, open_file(path)).update_state_sync("t", {"approved": True}, as_node="review")
    result = doc_graph(calls, open_file(path)).invoke(None, thread_id="t")
    assert result.state.sent == "hello!"


def test_at_a_breakpoint_the_update_stands_in_for_the_pending_task() -> None:
    calls: Counter[str] = Counter()
    graph = doc_graph(calls, InMemoryStateStore(), interrupt_before=["review"])
    assert graph.invoke({}, thread_id="t").status == "interrupted"
    graph.update_state_sync("t", {"approved": True, "log": ["by hand"]}, as_node="review")
    finished = graph.history_sync("t").events[-1]
    assert (finished.type, finished.data["node"], finished.data["edited"]) == (
        "task_finished",
        "review",
        True,
    )
    result = graph.invoke(None, thread_id="t")
    assert result.state.log == ["draft", "by hand", "send"]
    assert calls == Counter(draft=1, send=1)  # review never ran


def test_as_node_follows_a_branch_route_and_a_plain_edge() -> None:
    calls: Counter[str] = Counter()

    @node
    def pick(state: Doc) -> dict:
        calls["pick"] += 1
        return {}

    @node
    def send(state: Doc) -> dict:
        calls["send"] += 1
        return {"log": ["send"]}

    @node
    def archive(state: Doc) -> dict:
        calls["archive"] += 1
        return {"log": ["archive"]}

    graph = Graph(Doc, state_store=InMemoryStateStore()).flow(
        START >> pick,
        pick >> branch(lambda s: s.route, {"send": send, "archive": archive}),
        send >> archive,
        archive >> END,
    )
    graph.invoke({"route": "archive"}, thread_id="t")
    graph.update_state_sync("t", {"route": "send"}, as_node=pick)
    assert graph.invoke(None, thread_id="t").state.log == ["archive", "send", "archive"]
    graph.update_state_sync("t", {"log": ["sent by hand"]}, as_node=send)
    assert graph.get_state_sync("t").next == ("archive",)
    assert graph.invoke(None, thread_id="t").state.log[-2:] == ["sent by hand", "archive"]


def test_as_node_of_a_node_that_ends_the_flow_leaves_the_thread_completed() -> None:
    graph = doc_graph(Counter(), InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"sent": "by hand"}, as_node="send")
    snapshot = graph.get_state_sync("t")
    assert (snapshot.status, snapshot.next, snapshot.value.sent) == ("idle", (), "by hand")
    with pytest.raises(ResumeError, match="no unfinished superstep"):
        graph.invoke(None, thread_id="t")


def test_an_unknown_node_is_refused_listing_the_nodes() -> None:
    graph = doc_graph(Counter(), InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    before = len(graph.history_sync("t").events)
    with pytest.raises(GraphConfigError, match=r"as_node='reviewer'.*'draft', 'review', 'send'"):
        graph.update_state_sync("t", {"approved": True}, as_node="reviewer")
    assert len(graph.history_sync("t").events) == before


def test_as_node_on_a_paused_thread_is_refused_with_the_fix() -> None:
    @node
    def ask(state: Doc) -> dict:
        return {"text": interrupt("text?", id="text")}

    graph = Graph(Doc, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    graph.invoke({}, thread_id="t")
    with pytest.raises(ResumeError, match=r"paused.*resume=Resume"):
        graph.update_state_sync("t", {"text": "x"}, as_node="ask")


def test_a_node_without_an_unfinished_task_in_the_pending_superstep_is_refused() -> None:
    graph = doc_graph(Counter(), InMemoryStateStore(), interrupt_before=["review"])
    graph.invoke({}, thread_id="t")
    with pytest.raises(GraphConfigError, match=r"no unfinished task of 'send'.*'review'"):
        graph.update_state_sync("t", {"sent": "x"}, as_node="send")


def test_an_update_that_conflicts_with_a_finished_task_is_refused_before_it_is_stored() -> None:
    @node
    def left(state: Doc) -> dict:
        return {"text": "left"}

    @node
    def right(state: Doc) -> dict:
        raise ConnectionError("down")

    @node(goto=[left, right])
    def split(state: Doc) -> Command:
        return Command(goto=[left, right])

    graph = Graph(Doc, state_store=InMemoryStateStore()).flow(
        START >> split, left >> END, right >> END
    )
    with pytest.raises(ConnectionError):
        graph.invoke({}, thread_id="t")
    with pytest.raises(InvalidUpdateError):
        graph.update_state_sync("t", {"text": "right"}, as_node="right")
    graph.update_state_sync("t", {"sent": "right"}, as_node="right")
    assert graph.invoke(None, thread_id="t").state.sent == "right"


def test_as_node_creates_a_thread_with_create_and_refuses_a_missing_one_without() -> None:
    calls: Counter[str] = Counter()
    graph = doc_graph(calls, InMemoryStateStore())
    with pytest.raises(UnknownThreadError):
        graph.update_state_sync("new", {"text": "typed"}, as_node="draft")
    graph.update_state_sync("new", {"text": "typed"}, as_node="draft", create=True)
    assert graph.invoke(None, thread_id="new").state.text == "typed!"
    assert calls == Counter(review=1, redo=1)


def test_the_async_form_takes_as_node_too() -> None:
    graph = doc_graph(Counter(), InMemoryStateStore())
    graph.invoke({}, thread_id="t")

    async def main() -> str:
        return await graph.update_state("t", {"approved": True}, as_node="review")

    event_id = anyio.run(main)
    assert graph.history_sync("t").events[-1].id == event_id


def test_as_node_before_the_graph_has_a_flow_is_refused() -> None:
    graph = Graph(Doc, state_store=InMemoryStateStore())
    with pytest.raises(GraphConfigError, match=r"has no flow yet.*graph.flow\(START"):
        graph.update_state_sync("t", {}, as_node="review")


def test_a_node_that_routes_only_by_command_is_refused_as_it_has_no_route_to_follow() -> None:
    @node
    def done(state: Doc) -> dict:
        return {}

    @node(goto=[done])
    def chooser(state: Doc) -> Command:
        return Command(goto=done)

    graph = Graph(Doc, state_store=InMemoryStateStore()).flow(START >> chooser, done >> END)
    graph.invoke({}, thread_id="t")
    with pytest.raises(GraphConfigError, match=r"Node 'chooser' has no edge.*no route to follow"):
        graph.update_state_sync("t", {"text": "x"}, as_node="chooser")


def test_state_history_names_the_node_an_update_was_made_as() -> None:
    graph = doc_graph(Counter(), InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"approved": True}, as_node="review")
    graph.update_state_sync("t", {"text": "plain edit"})
    steps = graph.state_history_sync("t").steps
    assert [(s.event.type, s.nodes) for s in steps[-2:]] == [
        ("state_updated", ("review",)),
        ("state_updated", ()),
    ]
    assert steps[-2].snapshot.next == ("send",)
