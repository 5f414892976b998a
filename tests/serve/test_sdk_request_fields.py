"""Fields the LangGraph SDKs send that the server must honour, not drop.

Each test sends the exact body or query the JS client (``@langchain/langgraph-sdk``) sends
for the call named, and checks the answer LangGraph's own server gives, or the clear
refusal nodestep gives where it cannot do the same (a message's image, the thread event
protocol).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from serve_graphs import GRAPHS
from starlette.testclient import TestClient

from nodestep import InMemoryStateStore
from nodestep.serve import create_app


@pytest.fixture
def http() -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as client:
        yield client


def superstep(values: dict[str, Any], as_node: str) -> dict[str, Any]:
    return {"updates": [{"values": values, "as_node": as_node}]}


def sse(text: str) -> list[tuple[str, str]]:
    """Return ``(event, id)`` of each event of a stream's text."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        if "event" in fields:
            found.append((fields["event"], fields["id"]))
    return found


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def test_a_thread_created_with_supersteps_holds_their_state(http: TestClient) -> None:
    # threads.create({graphId: "steps", supersteps: [...]}), as a thread is copied.
    body = {"metadata": {"graph_id": "steps"}, "supersteps": [superstep({"n": 5}, "one")]}
    thread = http.post("/threads", json=body).json()
    assert thread["values"] == {"n": 5, "log": []}
    assert thread["status"] == "interrupted"  # LangGraph's status while tasks wait
    state = http.get(f"/threads/{thread['thread_id']}/state").json()
    assert state["next"] == ["two"]
    assert state["metadata"]["source"] == "state_updated"
    done = http.post(
        f"/threads/{thread['thread_id']}/runs/wait", json={"assistant_id": "steps", "input": None}
    )
    assert done.json() == {"n": 7, "log": ["two", "three"]}


def test_supersteps_go_to_a_new_thread_once(http: TestClient) -> None:
    # A create retried with if_exists="do_nothing" must not apply the edits again.
    body = {
        "thread_id": "7f0c1a4e-5a55-4bd9-9d36-2d1c5ee3c001",
        "metadata": {"graph_id": "steps"},
        "supersteps": [superstep({"log": ["copied"]}, "three")],
        "if_exists": "do_nothing",
    }
    assert http.post("/threads", json=body).json()["values"]["log"] == ["copied"]
    assert http.post("/threads", json=body).json()["values"]["log"] == ["copied"]


def test_supersteps_without_a_served_graph_are_refused_and_make_no_thread(
    http: TestClient,
) -> None:
    body = {"supersteps": [superstep({"n": 5}, "one")]}
    answer = http.post("/threads", json=body)
    assert answer.status_code == 422
    assert "graph_id" in answer.json()["detail"] and "steps" in answer.json()["detail"]
    assert http.post("/threads/count", json={}).json() == 0


def test_a_superstep_the_graph_refuses_leaves_no_thread(http: TestClient) -> None:
    tid = "7f0c1a4e-5a55-4bd9-9d36-2d1c5ee3c002"
    body = {
        "thread_id": tid,
        "metadata": {"graph_id": "steps"},
        "supersteps": [superstep({"n": 5}, "one"), superstep({"n": 6}, "nope")],
    }
    answer = http.post("/threads", json=body)
    assert answer.status_code == 422
    assert "'nope'" in answer.json()["detail"]
    assert http.get(f"/threads/{tid}").status_code == 404
    again = http.post("/threads", json=body | {"supersteps": [superstep({"n": 5}, "one")]})
    assert again.json()["values"] == {"n": 5, "log": []}


def test_a_superstep_with_a_command_is_refused(http: TestClient) -> None:
    update = {"command": {"resume": "yes"}, "as_node": "ask"}
    body = {"metadata": {"graph_id": "approval"}, "supersteps": [{"updates": [update]}]}
    answer = http.post("/threads", json=body)
    assert answer.status_code == 422
    assert "command" in answer.json()["detail"]
    assert http.post("/threads/count", json={}).json() == 0


def test_history_with_a_checkpoint_lists_only_that_checkpoint(http: TestClient) -> None:
    # threads.getHistory(thread, {checkpoint: {checkpoint_id}}), as LangGraph filters it.
    tid = http.post("/threads", json={}).json()["thread_id"]
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {"n": 0}})
    every = http.post(f"/threads/{tid}/history", json={"limit": 100}).json()
    middle = every[2]["checkpoint"]
    body = {"limit": 10, "checkpoint": {"checkpoint_id": middle["checkpoint_id"]}}
    found = http.post(f"/threads/{tid}/history", json=body).json()
    assert found == [every[2]]
    body["checkpoint"] = {"checkpoint_id": "no-such-checkpoint"}
    assert http.post(f"/threads/{tid}/history", json=body).json() == []


def test_assistants_count_filters_as_search_does(http: TestClient) -> None:
    # assistants.count({metadata}) and ({graphId}) count what assistants.search finds.
    for body in ({"metadata": {"created_by": "nobody"}}, {"graph_id": "steps"}, {"name": "x"}):
        found = http.post("/assistants/search", json=body | {"limit": 100}).json()
        assert http.post("/assistants/count", json=body).json() == len(found)
    assert http.post("/assistants/count", json={"metadata": {"created_by": "nobody"}}).json() == 0


def test_runs_list_with_select_answers_only_those_fields(http: TestClient) -> None:
    # runs.list(thread, {select: ["run_id", "status"]}) sends select once per field.
    tid = http.post("/threads", json={}).json()["thread_id"]
    http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {"n": 0}})
    listed = http.get(f"/threads/{tid}/runs", params=[("select", "run_id"), ("select", "status")])
    assert [sorted(run) for run in listed.json()] == [["run_id", "status"]]
    wrong = http.get(f"/threads/{tid}/runs", params={"select": "colour"})
    assert wrong.status_code == 422
    assert "'colour'" in wrong.json()["detail"] and "run_id" in wrong.json()["detail"]


def test_join_stream_with_stream_mode_sends_only_those_modes(http: TestClient) -> None:
    # runs.joinStream(thread, run, {streamMode: ["updates"]}) sends stream_mode=updates.
    tid = http.post("/threads", json={}).json()["thread_id"]
    body = {"assistant_id": "outer", "input": {}, "stream_mode": ["values", "updates"]}
    body |= {"stream_subgraphs": True}
    run = http.post(f"/threads/{tid}/runs", json=body).json()
    http.get(f"/threads/{tid}/runs/{run['run_id']}/join")
    url = f"/threads/{tid}/runs/{run['run_id']}/stream"
    every = sse(http.get(url).text)
    updates = [(event, n) for event, n in every if event.startswith("updates")]
    assert {event for event, _ in updates} == {"updates", "updates|inner"}
    assert sse(http.get(url, params={"stream_mode": "updates"}).text) == updates
    as_list = http.get(url, params={"stream_mode": '["updates", "values"]'}).text
    assert sse(as_list) == every[1:]  # all but metadata
    wrong = http.get(url, params={"stream_mode": "tasks"})
    assert wrong.status_code == 422 and "'tasks'" in wrong.json()["detail"]


def test_join_stream_for_some_modes_still_sends_the_runs_error(http: TestClient) -> None:
    tid = http.post("/threads", json={}).json()["thread_id"]
    body = {"assistant_id": "broken", "input": {"x": 1}, "stream_mode": ["values"]}
    run = http.post(f"/threads/{tid}/runs", json=body).json()
    http.get(f"/threads/{tid}/runs/{run['run_id']}/join")
    url = f"/threads/{tid}/runs/{run['run_id']}/stream"
    assert [e for e, _ in sse(http.get(url, params={"stream_mode": "updates"}).text)] == ["error"]


def test_threads_count_with_values_counts_what_search_finds(http: TestClient) -> None:
    # threads.count({values: {...}}), as threads.search({values: {...}}) finds them.
    for n in (0, 1, 1):
        tid = http.post("/threads", json={}).json()["thread_id"]
        http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", "input": {"n": n}})
    for values in ({"n": 4}, {"n": 3}, {"n": 99}, {"log": ["one", "two", "three"]}):
        found = http.post("/threads/search", json={"values": values, "limit": 100}).json()
        assert http.post("/threads/count", json={"values": values}).json() == len(found)
    assert http.post("/threads/count", json={"values": {"n": 4}}).json() == 2


def test_searches_send_the_paging_headers_the_js_client_pages_with(http: TestClient) -> None:
    # assistants.search({limit, offset, includePagination: true}) reads X-Pagination-Next.
    total = len(GRAPHS)
    first = http.post("/assistants/search", json={"limit": 2, "offset": 0})
    assert first.headers["x-pagination-total"] == str(total)
    assert first.headers["x-pagination-next"] == "2"
    last = http.post("/assistants/search", json={"limit": 2, "offset": total - 1})
    assert len(last.json()) == 1 and "x-pagination-next" not in last.headers
    for _ in range(3):
        http.post("/threads", json={})
    threads = http.post("/threads/search", json={"limit": 2})
    assert threads.headers["x-pagination-total"] == "3"
    assert threads.headers["x-pagination-next"] == "2"
    browser = http.post(
        "/threads/search", json={"limit": 2}, headers={"Origin": "http://localhost:3000"}
    )
    assert "x-pagination-next" in browser.headers["access-control-expose-headers"]


def test_a_message_with_an_image_block_is_refused_before_the_run(http: TestClient) -> None:
    # useStream's submit of a multimodal message: a nodestep message holds text.
    tid = http.post("/threads", json={}).json()["thread_id"]
    content = [{"type": "text", "text": "what is this?"}, IMAGE]
    body = {"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": content}]}}
    answer = http.post(f"/threads/{tid}/runs/stream", json=body)
    assert answer.status_code == 422
    assert "'image_url'" in answer.json()["detail"] and "text" in answer.json()["detail"]
    assert http.get(f"/threads/{tid}/runs").json() == []
    assert http.get(f"/threads/{tid}").json()["status"] == "idle"
    text = [{"type": "text", "text": "what "}, "is this?"]
    body["input"] = {"messages": [{"type": "human", "content": text, "id": "h1"}]}
    values = http.post(f"/threads/{tid}/runs/wait", json=body).json()
    assert values["messages"][0]["content"] == "what is this?"


def test_the_thread_event_protocol_is_501_naming_what_to_use(http: TestClient) -> None:
    # client.threads.stream(...) (streamProtocol "v2-sse") posts to these two.
    tid = http.post("/threads", json={}).json()["thread_id"]
    for path in (f"/threads/{tid}/commands", f"/threads/{tid}/stream/events"):
        refused = http.post(path, json={})
        assert refused.status_code == 501
        assert "runs.stream" in refused.json()["detail"]
