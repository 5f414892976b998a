"""The app in process (Starlette's TestClient): threads, streams and the run queue's rules."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import pytest
from serve_graphs import GRAPHS
from starlette.testclient import TestClient

from nodestep import GraphConfigError, InMemoryStateStore, StateStoreError
from nodestep.serve import create_app
from nodestep.store import Record

BASE = "http://127.0.0.1:2024"


@pytest.fixture
def http() -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore(), heartbeat=0.05)
    with TestClient(app, base_url=BASE) as client:
        yield client


def new_thread(http: TestClient, **body: Any) -> str:
    answer = http.post("/threads", json=body)
    assert answer.status_code == 200
    return str(answer.json()["thread_id"])


def sse_events(text: str) -> list[tuple[str, str]]:
    """Return ``(event, data)`` of each event of a stream's text; a comment as ``(":", it)``."""
    found = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line]
        if lines and lines[0].startswith(":"):
            found.append((":", lines[0]))
        fields = dict(line.split(": ", 1) for line in lines if not line.startswith(":"))
        if "event" in fields:
            found.append((fields["event"], fields.get("data", "")))
    return found


@pytest.mark.slow
def test_a_silent_stream_sends_heartbeat_comments(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "slow", "input": {"seconds": 0.3}, "stream_mode": ["updates"]}
    with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as answer:
        text = answer.read().decode()
    events = sse_events(text)
    assert (":", ": heartbeat") in events
    assert events[-1][0] == "updates"


def test_join_stream_with_last_event_id_sends_only_what_came_after(http: TestClient) -> None:
    tid = new_thread(http)
    run = http.post(
        f"/threads/{tid}/runs",
        json={"assistant_id": "steps", "input": {}, "stream_mode": ["updates"]},
    ).json()
    http.get(f"/threads/{tid}/runs/{run['run_id']}/join")
    whole = http.get(f"/threads/{tid}/runs/{run['run_id']}/stream").text
    assert [e for e, _ in sse_events(whole)] == ["metadata", "updates", "updates", "updates"]
    rest = http.get(
        f"/threads/{tid}/runs/{run['run_id']}/stream", headers={"Last-Event-ID": "2"}
    ).text
    assert sse_events(rest) == [("updates", '{"three":{"n":3,"log":["three"]}}')]


def test_copy_gives_a_new_thread_with_the_same_history(http: TestClient) -> None:
    tid = new_thread(http, metadata={"owner": "ada"})
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {"n": 5}})
    copy = http.post(f"/threads/{tid}/copy").json()
    assert copy["thread_id"] != tid
    assert copy["metadata"]["owner"] == "ada"
    assert copy["values"] == {"n": 8, "log": ["one", "two", "three"]}
    ours = http.post(f"/threads/{tid}/history", json={"limit": 100}).json()
    theirs = http.post(f"/threads/{copy['thread_id']}/history", json={"limit": 100}).json()
    assert [h["values"] for h in ours] == [h["values"] for h in theirs]
    assert not {h["checkpoint"]["checkpoint_id"] for h in ours} & {
        h["checkpoint"]["checkpoint_id"] for h in theirs
    }
    answer = http.post(
        f"/threads/{copy['thread_id']}/runs/wait", json={"assistant_id": "steps", "input": {}}
    )
    assert answer.json()["n"] == 11


def test_a_deleted_thread_is_gone_with_its_history_and_runs(http: TestClient) -> None:
    tid = new_thread(http)
    run = http.post(f"/threads/{tid}/runs", json={"assistant_id": "steps", "input": {}}).json()
    http.get(f"/threads/{tid}/runs/{run['run_id']}/join")
    assert http.delete(f"/threads/{tid}").status_code == 204
    assert http.get(f"/threads/{tid}").status_code == 404
    assert http.get(f"/threads/{tid}/runs/{run['run_id']}").status_code == 404
    again = new_thread(http, thread_id=tid)  # the id can start a new history
    assert http.get(f"/threads/{again}/state").json()["values"] == {}


def test_patch_merges_metadata(http: TestClient) -> None:
    tid = new_thread(http, metadata={"a": 1})
    patched = http.patch(f"/threads/{tid}", json={"metadata": {"b": 2}}).json()
    assert patched["metadata"] == {"a": 1, "b": 2}


def test_the_graph_drawing_and_schemas_come_from_the_graph(http: TestClient) -> None:
    drawing = http.get("/assistants/steps/graph").json()
    assert {n["id"] for n in drawing["nodes"]} == {"__start__", "one", "two", "three", "__end__"}
    assert {(e["source"], e["target"]) for e in drawing["edges"]} == {
        ("__start__", "one"),
        ("one", "two"),
        ("two", "three"),
        ("three", "__end__"),
    }
    schemas = http.get("/assistants/steps/schemas").json()
    assert set(schemas["state_schema"]["properties"]) == {"n", "log"}


def test_an_unknown_route_and_a_wrong_query_number_are_json_4xx(http: TestClient) -> None:
    assert http.get("/crons").status_code == 404
    tid = new_thread(http)
    answer = http.get(f"/threads/{tid}/runs", params={"limit": "many"})
    assert answer.status_code == 422
    assert "detail" in answer.json()


class FailingEnds(InMemoryStateStore):
    """A store that refuses to record a run's end, as a full disk would."""

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        if any(r.get("row", {}).get("status") == "success" for r in records):
            raise StateStoreError("the disk is full")
        await super().append(thread_id, branch_id, records, after=after)


def test_a_store_that_cannot_record_a_runs_end_leaves_the_server_serving() -> None:
    with TestClient(create_app(GRAPHS, store=FailingEnds()), base_url=BASE) as http:
        tid = new_thread(http)
        answer = http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {}})
        assert answer.json()["n"] == 3
        run = http.get(f"/threads/{tid}/runs").json()[0]
        assert run["status"] == "pending"  # a restart runs it again, by its request key
        assert http.get("/info").status_code == 200
        other = new_thread(http)
        assert http.post("/threads/search", json={}).status_code == 200
        assert other


def test_search_by_values_pages_after_filtering_and_history_filters_by_metadata(
    http: TestClient,
) -> None:
    for n in range(4):
        tid = new_thread(http, metadata={"batch": "v"})
        http.post(
            f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {"n": n % 2}}
        )
    body = {"metadata": {"batch": "v"}, "values": {"n": 4}, "limit": 1}
    first = http.post("/threads/search", json=body).json()
    second = http.post("/threads/search", json=body | {"offset": 1}).json()
    assert len(first) == len(second) == 1
    assert first[0]["thread_id"] != second[0]["thread_id"]
    history = http.post(
        f"/threads/{first[0]['thread_id']}/history",
        json={"limit": 1, "metadata": {"source": "run_started"}},
    ).json()
    assert [h["metadata"]["source"] for h in history] == ["run_started"]


def test_context_reaches_the_nodes_and_is_never_shown(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "greeting", "input": {}, "context": {"name": "zoe"}}
    assert http.post(f"/threads/{tid}/runs/wait", json=body).json() == {"text": "hello zoe"}
    configured = body | {"context": None, "config": {"configurable": {"name": "quinn"}}}
    answer = http.post(f"/threads/{tid}/runs/wait", json=configured).json()
    assert answer == {"text": "hello quinn"}
    runs = http.get(f"/threads/{tid}/runs").text
    assert "zoe" not in runs and "quinn" not in runs


def test_interrupt_before_stops_at_the_node_and_a_run_without_input_goes_on(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "steps", "input": {}, "interrupt_before": ["two"]}
    stopped = http.post(f"/threads/{tid}/runs/wait", json=body).json()
    assert stopped["n"] == 1
    assert http.get(f"/threads/{tid}/state").json()["next"] == ["two"]
    assert http.get(f"/threads/{tid}").json()["status"] == "interrupted"
    done = http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps"}).json()
    assert done == {"n": 3, "log": ["one", "two", "three"]}


def test_a_new_thread_has_no_checkpoint_and_an_unknown_one_gives_empty_values(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    fresh = http.get(f"/threads/{tid}/state").json()
    assert fresh["checkpoint"] is None and fresh["values"] == {}
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {}})
    unknown = "1f0c0000-0000-6000-8000-000000000000"
    answer = http.get(f"/threads/{tid}/state/{unknown}")
    assert answer.status_code == 200
    assert answer.json()["values"] == {}
    assert answer.json()["checkpoint"]["checkpoint_id"] == unknown


def test_a_background_run_is_stored_before_its_answer_and_a_waited_one_once_at_its_end() -> None:
    store = InMemoryStateStore()

    def run_rows(run_id: str) -> list[str]:
        records = anyio.run(store.read, "nodestep-serve", "main")
        return [r["row"]["status"] for r in records if r.get("row", {}).get("run_id") == run_id]

    with TestClient(create_app(GRAPHS, store=store), base_url=BASE) as http:
        tid = new_thread(http)
        run = http.post(
            f"/threads/{tid}/runs", json={"assistant_id": "slow", "input": {"seconds": 0.05}}
        ).json()
        assert run_rows(run["run_id"])[0] == "pending"  # stored before the answer
        http.get(f"/threads/{tid}/runs/{run['run_id']}/join")
        assert run_rows(run["run_id"]) == ["pending", "success"]
        http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "slow", "input": {}})
        waited = http.get(f"/threads/{tid}/runs").json()[0]
        assert run_rows(waited["run_id"]) == ["success"]


def test_stream_subgraphs_names_a_childs_events_by_its_task_path(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "outer", "input": {}, "stream_mode": ["updates"]}
    plain = http.post(f"/threads/{tid}/runs/stream", json=body).text
    assert [e for e, _ in sse_events(plain)] == ["metadata", "updates", "updates"]
    nested = http.post(f"/threads/{tid}/runs/stream", json=body | {"stream_subgraphs": True}).text
    events = sse_events(nested)
    assert ("updates|inner", '{"two":{"n":4,"log":["two"]}}') in events
    assert [e for e, _ in events if e == "updates"] == ["updates", "updates"]


def test_a_run_shows_running_while_it_runs(http: TestClient) -> None:
    tid = new_thread(http)
    run = http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "slow", "input": {"seconds": 30}}
    ).json()
    for _ in range(200):
        if http.get(f"/threads/{tid}/runs/{run['run_id']}").json()["status"] == "running":
            break
    assert http.get(f"/threads/{tid}/runs/{run['run_id']}").json()["status"] == "running"
    http.post(f"/threads/{tid}/runs/{run['run_id']}/cancel", params={"wait": "1"})
    assert http.get(f"/threads/{tid}/runs/{run['run_id']}").json()["status"] == "interrupted"


def test_workers_need_a_store_url_and_every_graphs_import_path() -> None:
    queue = "postgresql://app@db/queue"
    with pytest.raises(GraphConfigError, match="store= as a URL"):
        create_app(GRAPHS, store=InMemoryStateStore(), workers=queue)
    with pytest.raises(GraphConfigError, match=r"missing .*approval.*graph_paths="):
        create_app(GRAPHS, store=queue, workers=queue, graph_paths={"chat": "serve_graphs:chat"})


def test_search_with_ids_finds_only_those_threads_and_select_picks_the_fields(
    http: TestClient,
) -> None:
    named = new_thread(http, metadata={"team": "ids"})
    new_thread(http, metadata={"team": "ids"})
    found = http.post("/threads/search", json={"ids": [named], "limit": 100}).json()
    assert [t["thread_id"] for t in found] == [named]
    assert http.post("/threads/count", json={"ids": [named]}).json() == 1
    body = {"metadata": {"team": "ids"}, "select": ["thread_id", "status"]}
    assert [sorted(t) for t in http.post("/threads/search", json=body).json()] == [
        ["status", "thread_id"]
    ] * 2
    refused = http.post("/threads/search", json={"select": ["thread_id", "colour"]})
    assert refused.status_code == 422 and "'colour'" in refused.json()["detail"]


def test_update_state_refuses_a_list_and_edits_a_thread_whose_first_run_failed(
    http: TestClient,
) -> None:
    tid = new_thread(http)
    failed = http.post(
        f"/threads/{tid}/runs/wait", json={"assistant_id": "broken", "input": {"x": "many"}}
    ).json()
    assert "__error__" in failed
    edited = http.post(f"/threads/{tid}/state", json={"values": {"x": 2}})
    assert edited.status_code == 200
    assert http.get(f"/threads/{tid}/state").json()["values"] == {"x": 2}
    listed = http.post(f"/threads/{tid}/state", json={"values": [{"x": 3}]})
    assert listed.status_code == 400 and "got a list" in listed.json()["detail"]
    assert http.get(f"/threads/{tid}/state").json()["values"] == {"x": 2}


def test_runs_name_where_to_reconnect_in_location(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "steps", "input": {}}
    waited = http.post(f"/threads/{tid}/runs/wait", json=body)
    run = waited.headers["content-location"]
    assert waited.headers["location"] == f"{run}/join"
    with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as streamed:
        run = streamed.headers["content-location"]
        assert streamed.headers["location"] == f"{run}/stream"
    stateless = http.post("/runs/stream", json=body)
    assert stateless.headers["location"].endswith("/stream")
    # the stateless run's thread is gone, but a client that lost the stream still joins it
    again = http.get(stateless.headers["location"], headers={"Last-Event-ID": "0"})
    assert [e for e, _ in sse_events(again.text)] == ["values"] * 4
    assert http.get(stateless.headers["content-location"]).json()["status"] == "success"


@pytest.mark.slow
def test_a_wait_sends_newlines_while_the_run_works_then_its_values(http: TestClient) -> None:
    tid = new_thread(http)
    body = {"assistant_id": "slow", "input": {"seconds": 0.3}}
    answer = http.post(f"/threads/{tid}/runs/wait", json=body)
    assert answer.text.startswith("\n") and answer.json() == {"seconds": 0.3, "runs": ["worked"]}


def test_an_edit_sets_the_status_its_state_shows(http: TestClient) -> None:
    # As LangGraph's: the status follows the edited state, whatever it was.
    tid = new_thread(http)
    body = {"assistant_id": "steps", "input": {}, "interrupt_before": ["two"]}
    http.post(f"/threads/{tid}/runs/wait", json=body)
    paused_at = http.get(f"/threads/{tid}/state").json()["checkpoint"]["checkpoint_id"]
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps"})
    assert http.get(f"/threads/{tid}").json()["status"] == "idle"
    # A fork of the paused event waits there again.
    edit = {"values": {"n": 10}, "checkpoint_id": paused_at}
    assert http.post(f"/threads/{tid}/state", json=edit).status_code == 200
    assert http.get(f"/threads/{tid}").json()["status"] == "interrupted"
    assert http.get(f"/threads/{tid}/state").json()["next"] == ["two"]

    failed = new_thread(http)
    http.post(f"/threads/{failed}/runs/wait", json={"assistant_id": "broken", "input": {"x": "a"}})
    assert http.get(f"/threads/{failed}").json()["status"] == "error"
    assert http.post(f"/threads/{failed}/state", json={"values": {"x": 2}}).status_code == 200
    shown = http.get(f"/threads/{failed}").json()
    assert (shown["status"], shown.get("error")) == ("idle", None)
