"""What notebooks show: each object's HTML view, escaped, offline, and paged where long."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    History,
    HistoryEvent,
    HistoryStep,
    InMemoryStateStore,
    Resume,
    StateHistory,
    StateSnapshot,
    add,
    interrupt,
    node,
)
from nodestep.agents import Agent, AgentStep, ScriptedModel
from nodestep.store import BranchRecord, FilesystemStateStore, PostgresStateStore, SQLiteStateStore
from nodestep.testing import sequential_ids, ticking_clock

SCRIPT = "<script>alert(1)</script>"


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


@node
def ask(state: Poll) -> dict[str, Any]:
    answer = interrupt({"question": SCRIPT}, id="go")
    return {"note": str(answer)}


@node
def tally(state: Poll) -> dict[str, Any]:
    return {"note": f"{len(state.votes)} votes"}


def _graph() -> Graph[Poll]:
    return Graph(
        Poll,
        name="poll",
        state_store=InMemoryStateStore(),
        id_factory=sequential_ids(),
        clock=ticking_clock(1_700_000_000.0, 0.25),
    ).flow(START >> ask, ask >> tally, tally >> END)


def _rows(html: str) -> list[list[str]]:
    """The body rows of the first table, each cell's text."""
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def _assert_offline_and_escaped(html: str) -> None:
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    assert not re.search(r"(src|href)=", html)


class CountingSteps(tuple[Any, ...]):
    """A history's steps that count which ones are read."""

    read: set[int]

    def __getitem__(self, index: Any) -> Any:
        self.read.update(range(len(self))[index] if isinstance(index, slice) else [index])
        return super().__getitem__(index)


def _long_history(count: int) -> StateHistory[Poll]:
    state = Poll()
    steps = []
    for n in range(1, count + 1):
        event = HistoryEvent(f"e{n}", "superstep_completed", n, 1_700_000_000.0 + n, "t", "main")
        snapshot = StateSnapshot(state, n, f"e{n}", "t", "main", "idle", (), {})
        steps.append(HistoryStep(event, snapshot, ("tally",)))
    counting = CountingSteps(steps)
    counting.read = set()
    return StateHistory("t", "main", counting)


def test_a_history_of_ten_thousand_steps_shows_one_page_and_says_how_to_see_more() -> None:
    history = _long_history(10_000)
    html = history._repr_html_()
    assert len(_rows(html)) == 25
    assert _rows(html)[0][:4] == [
        "1",
        "2023-11-14 22:13:21.000 UTC",
        "superstep_completed",
        "tally",
    ]
    assert "Steps 1–25 of 10,000. 9,975 more steps" in html
    assert "<code>.page(2)</code>" in html
    assert history.steps.read <= set(range(26))  # type: ignore[attr-defined]  # only one page


def test_a_page_of_the_history_shows_its_own_steps() -> None:
    history = _long_history(60)
    page = history.page(3, size=25)
    assert [row[0] for row in _rows(page._repr_html_())] == [str(n) for n in range(51, 61)]
    assert "Steps 51–60 of 60." in page._repr_html_()
    assert repr(page) == "HistoryPage(thread_id='t', page 3 of 3, 10 steps)"
    assert "page 4 is past the last, 3" in history.page(4)._repr_html_()


@pytest.mark.parametrize("number", [0, -1, 1.5, True, "2"])
def test_a_page_number_must_be_a_whole_number_from_one(number: Any) -> None:
    with pytest.raises(GraphConfigError, match=r"takes a whole number from 1 as number"):
        _long_history(3).page(number)


def test_the_history_table_shows_kind_node_changed_fields_and_branch() -> None:
    graph = _graph()
    graph.invoke({"votes": ["yes"]}, thread_id="t")
    graph.invoke(None, thread_id="t", resume=Resume("fine"))
    history = graph.state_history_sync("t")
    rows = _rows(history._repr_html_())
    assert [row[2] for row in rows] == [
        "checkpoint",
        "run_started",
        "run_paused",
        "run_started",
        "task_finished",
        "superstep_completed",
        "superstep_completed",
        "run_completed",
    ][: len(rows)] or rows
    started = next(row for row in rows if row[2] == "run_started")
    assert started[4] == "votes"
    finished = [row for row in rows if row[3] == "tally"]
    assert finished and finished[0][4] == "note" and finished[0][5] == "main"
    assert all(re.fullmatch(r"2023-11-14 22:1\d:\d\d\.\d{3} UTC", row[1]) for row in rows)
    branch = graph.fork_sync("t", from_=history[2].event.id, name="<b>")
    forked = graph.state_history_sync("t", branch_id="<b>")
    assert _rows(forked._repr_html_())[-1][5] == "&lt;b&gt;"
    assert "&lt;b&gt;" in branch._repr_html_()


def test_a_history_shows_each_event_with_its_kind_nodes_and_id() -> None:
    graph = _graph()
    graph.invoke({"votes": ["yes"]}, thread_id="<t>")
    graph.invoke(None, thread_id="<t>", resume=Resume("fine"))
    history = graph.history_sync("<t>")
    html = history._repr_html_()
    assert "<t>" not in html and not re.search(r"(src|href)=", html)
    assert "History of thread &#x27;&lt;t&gt;&#x27;, branch &#x27;main&#x27;" in html
    rows = _rows(html)
    assert [row[0] for row in rows] == [str(e.sequence) for e in history]
    assert [row[2] for row in rows] == [e.type for e in history]
    assert [row[4] for row in rows] == [e.id for e in history]
    assert next(row[2:4] for row in rows if row[2] == "run_paused") == ["run_paused", "ask"]
    assert rows[-2][2:4] == ["superstep_completed", "tally"]
    assert all(re.fullmatch(r"2023-11-14 22:1\d:\d\d\.\d{3} UTC", row[1]) for row in rows)
    assert f"Events 1–{len(history)} of {len(history)}." in html


def test_a_history_of_ten_thousand_events_shows_one_page_and_says_where_the_rest_are() -> None:
    events = CountingSteps(
        HistoryEvent(
            f"e{n}", "task_finished", n, 1_700_000_000.0 + n, "t", "main", {"node": SCRIPT}
        )
        for n in range(1, 10_001)
    )
    events.read = set()
    html = History("t", "main", events)._repr_html_()  # type: ignore[arg-type]  # counts reads
    _assert_offline_and_escaped(html)
    assert len(_rows(html)) == 25
    assert _rows(html)[0] == [
        "1",
        "2023-11-14 22:13:21.000 UTC",
        "task_finished",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "e1",
    ]
    assert "Events 1–25 of 10,000. 9,975 more events: <code>.events[25:50]</code>" in html
    assert events.read <= set(range(25))  # only the page is read
    short = History("t", "main", list(events[:30]))._repr_html_()
    assert "Events 1–25 of 30. 5 more events: <code>.events[25:]</code> holds them." in short


def test_an_empty_history_says_it_has_no_events() -> None:
    html = _graph().history_sync("never-ran")._repr_html_()
    assert _rows(html) == [] and "No events" in html


def test_results_snapshots_and_interrupts_show_status_state_and_what_is_asked() -> None:
    graph = _graph()
    paused = graph.invoke({"votes": [SCRIPT]}, thread_id="t")
    html = paused._repr_html_()
    _assert_offline_and_escaped(html)
    assert "interrupted" in html and "ask:go" in html and "resume=Resume(value)" in html
    _assert_offline_and_escaped(paused.interrupt._repr_html_())
    snapshot = graph.get_state_sync("t")
    html = snapshot._repr_html_()
    _assert_offline_and_escaped(html)
    assert "paused" in html and "nodestep-snapshot" in html


def test_a_graph_offers_html_svg_and_mermaid() -> None:
    graph = _graph()
    bundle = graph._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "image/svg+xml", "text/vnd.mermaid"}
    assert bundle["image/svg+xml"].startswith("<svg")
    assert bundle["text/vnd.mermaid"].startswith("flowchart TD")
    assert bundle["image/svg+xml"] in bundle["text/html"]
    assert "Graph &#x27;poll&#x27; over Poll: 2 nodes" in bundle["text/html"]


def test_a_graph_without_a_flow_says_so() -> None:
    bundle = Graph(Poll, name="<x>")._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert "No flow yet" in bundle["text/html"] and "&lt;x&gt;" in bundle["text/html"]


@pytest.mark.slow  # opens a SQLite file
def test_stores_show_their_kind_location_and_the_threads_they_can_count(tmp_path: Path) -> None:
    memory = InMemoryStateStore()
    Graph(Poll, state_store=memory).flow(START >> tally, tally >> END).invoke({}, thread_id="a")
    html = memory._repr_html_()
    assert "InMemoryStateStore" in html and re.search(r"threads</td><td[^>]*>1<", html)
    weird = tmp_path / SCRIPT.replace("/", "_")
    for store in (FilesystemStateStore(weird / "h.jsonl"), SQLiteStateStore(weird / "h.db")):
        html = store._repr_html_()
        _assert_offline_and_escaped(html)
        assert "threads" not in html  # counting would read the whole history
    html = PostgresStateStore("postgresql://u:pw-secret@127.0.0.1:9/app")._repr_html_()
    assert "pw-secret" not in html and "postgresql://u:***@127.0.0.1:9/app" in html


def test_an_agent_shows_its_nodes_and_drawing_and_a_step_its_reply(tmp_path: Path) -> None:
    (tmp_path / "chat.yaml").write_text(
        "kind: LLMNode\nname: chat\nprompts:\n  system:\n    en: Hi\n"
    )
    agent = Agent(tmp_path, start_node="chat", llm=ScriptedModel([SCRIPT]))
    html = agent._repr_html_()
    assert "LLMNode" in html and "<svg" in html and "chat" in html
    step = agent.step_sync("hello")
    html = step._repr_html_()
    _assert_offline_and_escaped(html)
    assert "completed" in html
    failed = AgentStep("", "c-1", "failed", error=f"ValueError: {SCRIPT}", failed_nodes=("x",))
    _assert_offline_and_escaped(failed._repr_html_())


def test_a_branch_record_shows_where_it_forks_from_and_when() -> None:
    html = BranchRecord("b", "t", "main", "e-1", 3, 1_700_000_000.0)._repr_html_()
    assert "main after event #3" in html and "2023-11-14 22:13:20.000 UTC" in html
