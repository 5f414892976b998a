"""The Python langgraph-sdk's sync client, in process: calls whose exact query or body
the server must take as LangGraph's server takes it.

The client is ``SyncLangGraphClient`` over Starlette's ``TestClient`` (an ``httpx.Client``),
so each call sends what ``get_sync_client`` sends over a socket.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import UnprocessableEntityError
from serve_graphs import GRAPHS
from starlette.testclient import TestClient

from nodestep import InMemoryStateStore
from nodestep.memory import InMemoryMemoryStore
from nodestep.serve import create_app


@pytest.fixture
def client() -> Iterator[SyncLangGraphClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        yield SyncLangGraphClient(http)


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def until(check: Callable[[], Any], what: str) -> Any:
    """Return ``check()`` once it is true; fail after 10 s (the run is a task elsewhere)."""
    deadline = time.monotonic() + 10
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
    return found


def test_join_stream_without_a_stream_mode_sends_every_event_of_the_run(
    client: SyncLangGraphClient,
) -> None:
    # The SDK sends "stream_mode=" (an empty value) when it is given none.
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "steps", input={"n": 0}, stream_mode=["updates", "custom"])
    events = [part.event for part in client.runs.join_stream(tid, run["run_id"])]
    assert events == ["metadata", "custom", "updates", "updates", "updates"]
    some = client.runs.join_stream(tid, run["run_id"], stream_mode="custom")
    assert [part.event for part in some] == ["custom"]


def test_a_negative_limit_or_offset_is_refused_rather_than_sliced(
    client: SyncLangGraphClient,
) -> None:
    # Each would reach a Python slice, where -1 means "all but the last".
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "steps", input={"n": 0})
    calls: list[Callable[[], object]] = [
        lambda: client.threads.search(limit=-1),
        lambda: client.threads.search(offset=-1),
        lambda: client.assistants.search(limit=-1),
        lambda: client.assistants.search(offset=-2),
        lambda: client.threads.get_history(tid, limit=-1),
        lambda: client.runs.list(tid, limit=-1),
        lambda: client.runs.list(tid, offset=-1),
    ]
    for call in calls:
        with pytest.raises(UnprocessableEntityError):
            call()
    assert len(client.threads.get_history(tid, limit=2)) == 2
    assert client.runs.list(tid, limit=0) == []


def test_a_cancelled_run_leaves_its_thread_interrupted_while_its_step_waits(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    run = client.runs.create(tid, "slow", input={"seconds": 30})
    until(lambda: client.threads.get_state(tid)["next"] == ["work"], "the run's step")
    client.runs.cancel(tid, run["run_id"], wait=True)
    assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
    # As LangGraph's server shows it, and as an update_state would leave it: tasks wait.
    assert client.threads.get(tid)["status"] == "interrupted"
    assert [t["name"] for t in client.threads.get_state(tid)["tasks"]] == ["work"]
    client.threads.update_state(tid, {"seconds": 0})
    assert client.runs.wait(tid, "slow", input=None)["runs"] == ["worked"]
    assert client.threads.get(tid)["status"] == "idle"


def test_assistants_search_by_name_finds_a_part_of_it_in_any_case(
    client: SyncLangGraphClient,
) -> None:
    found = [a["graph_id"] for a in client.assistants.search(name="ApPro")]
    assert found == ["approval"]
    assert client.assistants.count(name="proval") == 1
    assert client.assistants.search(name="no such name") == []


def test_a_store_ttl_that_is_not_above_zero_is_refused_in_the_minutes_sent() -> None:
    app = create_app(GRAPHS, store=InMemoryStateStore(), memory=InMemoryMemoryStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        client = SyncLangGraphClient(http)
        with pytest.raises(UnprocessableEntityError) as refused:
            client.store.put_item(["notes"], "k", {"text": "hi"}, ttl=-1)
        assert "ttl takes minutes" in str(refused.value)
        assert "got -1.0" in str(refused.value)
        client.store.put_item(["notes"], "k", {"text": "hi"}, ttl=0.5)
        assert client.store.get_item(["notes"], "k")["value"] == {"text": "hi"}


def test_a_run_with_a_webhook_is_refused_rather_than_never_called(
    client: SyncLangGraphClient,
) -> None:
    tid = client.threads.create()["thread_id"]
    with pytest.raises(UnprocessableEntityError) as refused:
        client.runs.create(tid, "steps", input={"n": 0}, webhook="http://127.0.0.1:9/done")
    assert "webhook is not served" in str(refused.value)
    assert client.runs.list(tid) == []


@pytest.mark.parametrize("before", ["*", ["one"]])
def test_a_run_paused_before_its_first_node_streams_the_state_with_its_input(
    client: SyncLangGraphClient, before: str | list[str]
) -> None:
    tid = client.threads.create()["thread_id"]
    parts = client.runs.stream(
        tid, "steps", input={"n": 5}, interrupt_before=before, stream_mode="values"
    )
    assert [(p.event, p.data) for p in parts][1:] == [("values", {"n": 5, "log": []})]
    assert client.threads.get_state(tid)["next"] == ["one"]


@pytest.mark.parametrize(
    "refused",
    [
        {"webhook": "http://127.0.0.1:9/done"},
        {"command": {"goto": "work"}},
        {"interrupt_before": ["wrok"]},
        {"stream_mode": "tasks"},
        {"input": {"messages": [{"type": "human", "content": [IMAGE]}]}},
    ],
)
def test_a_refused_run_changes_nothing_on_its_thread(
    client: SyncLangGraphClient, refused: dict[str, Any]
) -> None:
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "slow", input={"seconds": 0})
    running = client.runs.create(tid, "slow", input={"seconds": 30})
    until(lambda: client.threads.get_state(tid)["next"] == ["work"], "the running step")
    for strategy in ("interrupt", "rollback"):
        with pytest.raises(UnprocessableEntityError):
            client.runs.create(
                tid, "slow", **({"input": {}} | refused), multitask_strategy=strategy
            )
    # Neither refused run cancelled the running one, nor left a run or an error behind.
    assert client.runs.get(tid, running["run_id"])["status"] in ("pending", "running")
    assert len(client.runs.list(tid)) == 2
    client.runs.cancel(tid, running["run_id"], wait=True)


def test_assistants_search_sorts_and_selects_as_asked(client: SyncLangGraphClient) -> None:
    names = sorted(GRAPHS)
    down = client.assistants.search(sort_by="graph_id", sort_order="desc", limit=100)
    assert [a["graph_id"] for a in down] == names[::-1]
    up = client.assistants.search(sort_by="name", sort_order="asc", limit=2)
    assert [a["name"] for a in up] == names[:2]
    picked = client.assistants.search(graph_id="steps", select=["assistant_id", "graph_id"])
    assert picked == [{"assistant_id": picked[0]["assistant_id"], "graph_id": "steps"}]
    with pytest.raises(UnprocessableEntityError):
        client.assistants.search(select=["nope"])


def test_threads_search_extracts_values_at_the_paths_asked(client: SyncLangGraphClient) -> None:
    tid = client.threads.create(metadata={"shop": "north"})["thread_id"]
    client.runs.wait(tid, "steps", input={"n": 0})
    paths = {"n": "values.n", "last": "values.log[-1]", "shop": "metadata.shop"}
    paths |= {"none": "values.log[7]", "deeper": "values.n.x"}
    found = client.threads.search(ids=[tid], extract=paths, select=["thread_id"])
    assert found == [
        {
            "thread_id": tid,
            "extracted": {"n": 3, "last": "three", "shop": "north", "none": None, "deeper": None},
        }
    ]
    for wrong in ({"values": "values.n"}, {"1x": "values.n"}, {"n": "state.n"}):
        with pytest.raises(UnprocessableEntityError):
            client.threads.search(extract=wrong)
