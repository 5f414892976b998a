"""The async langgraph-sdk client against a real ``serve`` process: chats, streams, time travel.

One server per module, on an SQLite store of its own; each test uses threads of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from anyio.abc import ByteStream
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from serve_process import running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's async client runs on asyncio


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = Path(tmp_path_factory.mktemp("serve")) / "threads.db"
    with running(f"sqlite:///{path}") as base:
        yield base


@pytest.fixture
async def client(url: str) -> AsyncIterator[LangGraphClient]:
    async with get_client(url=url) as opened:
        yield opened


def human(text: str, ident: str) -> dict[str, Any]:
    return {"id": ident, "type": "human", "content": [{"type": "text", "text": text}]}


async def test_a_chat_thread_keeps_every_turn_with_the_ids_the_client_gave(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create(metadata={"user": "ada"})
    for n, text in enumerate(["hi", "how are you", "bye"]):
        values = await client.runs.wait(
            thread["thread_id"], "chat", input={"messages": [human(text, f"h{n}")]}
        )
        assert values["messages"][-1]["type"] == "ai"
        assert values["messages"][-1]["content"] == f"echo: {text}"
    state = await client.threads.get_state(thread["thread_id"])
    kinds = [(m["type"], m["id"]) for m in state["values"]["messages"]]
    assert [k for k, _ in kinds] == ["human", "ai"] * 3
    assert [i for k, i in kinds if k == "human"] == ["h0", "h1", "h2"]
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "idle"
    assert got["metadata"]["user"] == "ada"
    assert got["metadata"]["graph_id"] == "chat"
    assert got["metadata"]["assistant_id"] == (await client.assistants.get("chat"))["assistant_id"]


async def test_a_stream_sends_metadata_first_then_every_mode_asked(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = [
        (part.event, part.data)
        async for part in client.runs.stream(
            thread["thread_id"],
            "steps",
            input={"n": 10},
            stream_mode=["values", "updates", "custom"],
        )
    ]
    assert parts[0][0] == "metadata" and set(parts[0][1]) >= {"run_id", "attempt"}
    values = [data for event, data in parts if event == "values"]
    assert values[0]["n"] == 10  # the input applied, before any node ran
    assert values[-1] == {"n": 13, "log": ["one", "two", "three"]}
    updates = [data for event, data in parts if event == "updates"]
    assert [list(u) for u in updates] == [["one"], ["two"], ["three"]]
    assert [data for event, data in parts if event == "custom"] == [{"progress": "one"}]
    assert parts[-1][0] == "values"  # no end event: the stream closes


async def test_message_tuples_carry_the_id_of_the_stored_reply_and_the_node(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    chunks = [
        part.data
        async for part in client.runs.stream(
            thread["thread_id"],
            "chat",
            input={"messages": [human("tea please", "q1")]},
            stream_mode="messages-tuple",
        )
        if part.event == "messages"
    ]
    assert "".join(chunk["content"] for chunk, _ in chunks) == "echo: tea please"
    assert {chunk["type"] for chunk, _ in chunks} == {"AIMessageChunk"}
    assert {meta["langgraph_node"] for _, meta in chunks} == {"agent"}
    stored = (await client.threads.get_state(thread["thread_id"]))["values"]["messages"][-1]
    assert {chunk["id"] for chunk, _ in chunks} == {stored["id"]}


async def test_time_travel_runs_from_a_checkpoint_on_a_new_branch_the_thread_then_shows(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 0})
    history = await client.threads.get_history(tid, limit=50)
    before_two = next(h for h in history if h["next"] == ["two"])
    assert before_two["values"]["n"] == 1
    values = await client.runs.wait(
        tid, "steps", input=None, checkpoint_id=before_two["checkpoint"]["checkpoint_id"]
    )
    assert values == {"n": 3, "log": ["one", "two", "three"]}
    state = await client.threads.get_state(tid)
    assert state["checkpoint"]["branch_id"] != "main"
    history = await client.threads.get_history(tid, limit=100)
    assert history[0]["checkpoint"] == state["checkpoint"]
    assert {h["checkpoint"]["branch_id"] for h in history} == {
        "main",
        state["checkpoint"]["branch_id"],
    }
    ids = {h["checkpoint"]["checkpoint_id"] for h in history}
    assert all(
        h["parent_checkpoint"]["checkpoint_id"] in ids for h in history if h["parent_checkpoint"]
    )
    earlier = await client.threads.get_history(
        tid,
        limit=2,
        before={"configurable": {"checkpoint_id": history[0]["checkpoint"]["checkpoint_id"]}},
    )
    assert [h["checkpoint"] for h in earlier] == [h["checkpoint"] for h in history[1:3]]


async def test_update_state_edits_the_values_and_returns_the_new_head(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "steps", input={"n": 0})
    answer = await client.threads.update_state(tid, {"n": 100, "log": ["edited"]})
    state = await client.threads.get_state(tid)
    assert state["values"] == {"n": 100, "log": ["one", "two", "three", "edited"]}
    assert answer["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert answer["configurable"]["checkpoint_id"] == answer["checkpoint_id"]
    earlier = await client.threads.get_state(
        tid, checkpoint_id=state["parent_checkpoint"]["checkpoint_id"]
    )
    assert earlier["values"]["n"] == 3


async def test_thread_search_filters_by_metadata_and_status_and_pages(
    client: LangGraphClient,
) -> None:
    made = [
        (await client.threads.create(metadata={"team": "search-test", "n": n}))["thread_id"]
        for n in range(3)
    ]
    await client.runs.wait(made[0], "approval", input={"request": "leave"})
    found = await client.threads.search(metadata={"team": "search-test"}, limit=10)
    assert {t["thread_id"] for t in found} == set(made)
    paused = await client.threads.search(metadata={"team": "search-test"}, status="interrupted")
    assert [t["thread_id"] for t in paused] == [made[0]]
    first = await client.threads.search(metadata={"team": "search-test"}, limit=2, offset=0)
    rest = await client.threads.search(metadata={"team": "search-test"}, limit=2, offset=2)
    assert len(first) == 2 and len(rest) == 1
    assert await client.threads.count(metadata={"team": "search-test"}) == 3


async def test_a_second_run_on_a_busy_thread_is_refused_with_reject_and_queued_with_enqueue(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "slow", input={"seconds": 0.5})
    assert (await client.threads.get(tid))["status"] == "busy"
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "slow", input={"seconds": 0}, multitask_strategy="reject")
    second = await client.runs.create(
        tid, "slow", input={"seconds": 0}, multitask_strategy="enqueue"
    )
    assert (await client.runs.join(tid, second["run_id"]))["runs"] == ["worked", "worked"]
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "success"
    listed = await client.runs.list(tid)
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_cancel_stops_a_running_run_and_delete_removes_it(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "slow", input={"seconds": 30})
    await client.runs.cancel(tid, run["run_id"], wait=True)
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
    # Cancelled before or after its step began: the thread shows whether that step waits.
    waits = (await client.threads.get_state(tid))["next"]
    assert (await client.threads.get(tid))["status"] == ("interrupted" if waits else "idle")
    await client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, run["run_id"])


async def test_a_failing_node_ends_the_run_with_its_error_on_wait_and_on_the_stream(
    client: LangGraphClient, url: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    async with httpx.AsyncClient(base_url=url) as http:
        answer = await http.post(
            f"/threads/{tid}/runs/wait", json={"assistant_id": "broken", "input": {"x": 7}}
        )
    assert answer.status_code == 200
    assert answer.json() == {"__error__": {"error": "ValueError", "message": "x was 7"}}
    parts = [(p.event, p.data) async for p in client.runs.stream(tid, "broken", input={"x": 8})]
    assert parts[-1] == ("error", {"error": "ValueError", "message": "x was 8"})
    assert (await client.runs.list(tid))[0]["status"] == "error"
    thread = await client.threads.get(tid)
    assert thread["status"] == "error"


async def test_bad_requests_get_the_reference_servers_statuses(
    client: LangGraphClient, url: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "no-such-graph", input={})
    with pytest.raises(NotFoundError):
        await client.runs.create(tid, "00000000-0000-0000-0000-000000000000", input={})
    with pytest.raises(NotFoundError):
        await client.threads.get("3b1f3c1e-0000-4000-8000-000000000000")
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=tid)
    assert (await client.threads.create(thread_id=tid, if_exists="do_nothing"))["thread_id"] == tid
    async with httpx.AsyncClient(base_url=url) as http:
        assert (
            await http.post("/threads/nope/runs", json={"assistant_id": "steps"})
        ).status_code == 422
        assert (
            await http.post("/threads/nope/runs/wait", json={"assistant_id": "steps"})
        ).status_code == 400
        bad = await http.post(f"/threads/{tid}/runs", json={"input": 1})
        assert bad.status_code == 422
        assert {e["loc"][0] for e in bad.json()["detail"]} == {"assistant_id", "input"}
        assert (await http.post("/threads", content=b"{not json")).status_code == 422


async def test_a_stateless_run_leaves_no_thread_behind(client: LangGraphClient) -> None:
    before = await client.threads.count()
    assert await client.runs.wait(None, "steps", input={"n": 1}) == {
        "n": 4,
        "log": ["one", "two", "three"],
    }
    assert await client.threads.count() == before


async def test_a_run_from_a_checkpoint_object_without_input_regenerates_the_reply(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "chat", input={"messages": [human("first", "u1")]})
    history = await client.threads.get_history(tid, limit=100)
    head = history[0]
    reply_id = head["values"]["messages"][-1]["id"]
    # as useStream does: the reply's first state, and the checkpoint before it
    first_seen = [
        h for h in history if reply_id in [m["id"] for m in h["values"].get("messages", [])]
    ][-1]
    parent = first_seen["parent_checkpoint"]
    before_reply = await client.threads.get_state(tid, checkpoint_id=parent["checkpoint_id"])
    assert before_reply["next"] == ["agent"]
    values = await client.runs.wait(
        tid,
        "chat",
        input=None,
        checkpoint={"checkpoint_id": parent["checkpoint_id"], "checkpoint_ns": ""},
    )
    assert [m["id"] for m in values["messages"]] == ["u1", reply_id]
    history = await client.threads.get_history(tid, limit=100)
    assert history[0]["checkpoint"]["branch_id"] != "main"
    assert history[0]["values"] == values


async def test_a_stream_closed_by_the_client_cancels_the_run_with_on_disconnect_cancel(
    client: LangGraphClient, url: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    body = {"assistant_id": "slow", "input": {"seconds": 30}, "on_disconnect": "cancel"}
    async with (
        httpx.AsyncClient(base_url=url) as http,
        http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as answer,
    ):
        run_id = answer.headers["content-location"].rsplit("/", 1)[1]
        async for line in answer.aiter_lines():
            if line.startswith("event: metadata"):
                break
    for _ in range(200):
        if (await client.runs.get(tid, run_id))["status"] == "interrupted":
            break
        await anyio.sleep(0.05)
    assert (await client.runs.get(tid, run_id))["status"] == "interrupted"


@contextlib.asynccontextmanager
async def cutting_proxy(port: int, mark: bytes, count: int) -> AsyncIterator[int]:
    """Forward to the server on ``port``; cut the first connection once the client got
    ``count`` times ``mark`` (the end of the headers, of an event). Yield the proxy's port."""
    first = [True]

    async def forward(source: ByteStream, target: ByteStream, cut: bool) -> None:
        seen = b""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for data in source:
                seen += data
                if cut and seen.count(mark) >= count:
                    end = len(data) - (len(seen) - _nth_end(seen, mark, count))
                    await target.send(data[:end])
                    return
                await target.send(data)

    async def handle(client: ByteStream) -> None:
        cut, first[:] = first[0], [False]
        server = await anyio.connect_tcp("127.0.0.1", port)
        async with client, server, anyio.create_task_group() as group:
            group.start_soon(forward, client, server, False)
            await forward(server, client, cut)
            group.cancel_scope.cancel()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        group.cancel_scope.cancel()


def _nth_end(data: bytes, mark: bytes, n: int) -> int:
    at = -len(mark)
    for _ in range(n):
        at = data.index(mark, at + len(mark))
    return at + len(mark)


async def test_a_dropped_stream_reconnects_at_its_location_and_gets_each_event_once(
    client: LangGraphClient, url: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    port = int(url.rsplit(":", 1)[1])
    async with (
        cutting_proxy(port, b"\n\n", 2) as proxy,
        get_client(url=f"http://127.0.0.1:{proxy}") as cut,
    ):
        parts = [
            (part.event, part.data)
            async for part in cut.runs.stream(tid, "steps", input={"n": 0}, stream_mode="updates")
        ]
    assert [event for event, _ in parts] == ["metadata", "updates", "updates", "updates"]
    assert [list(data) for _, data in parts[1:]] == [["one"], ["two"], ["three"]]


async def test_a_dropped_wait_reconnects_at_its_join_and_gets_the_values(
    client: LangGraphClient, url: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    port = int(url.rsplit(":", 1)[1])
    async with (
        cutting_proxy(port, b"\r\n\r\n", 1) as proxy,
        get_client(url=f"http://127.0.0.1:{proxy}") as cut,
    ):
        with pytest.warns(UserWarning, match="reconnect to Location"):
            values = await cut.runs.wait(tid, "slow", input={"seconds": 0.5})
    assert values == {"seconds": 0.5, "runs": ["worked"]}
