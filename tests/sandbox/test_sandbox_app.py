"""The sandbox app in this process: routing, refusals with their fix, escaping."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from sandbox_graphs import chat, get_order, pricing, refund
from starlette.testclient import TestClient

from nodestep import Agent, GraphConfigError, InMemoryStateStore, ScriptedModel
from nodestep.sandbox import create_app


@pytest.fixture
def http() -> Iterator[TestClient]:
    app = create_app([pricing, chat], store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as client:
        yield client


def _csrf(http: TestClient, path: str = "/ui/graphs/pricing") -> str:
    found = re.search(r'name="csrf" value="(\w+)"', http.get(path).text)
    assert found is not None
    return found.group(1)


def test_ui_goes_to_the_pages_and_the_rest_to_the_api(http: TestClient) -> None:
    assert "<title>nodestep sandbox</title>" in http.get("/ui").text
    assert http.get("/ui/").status_code == 200
    assert http.get("/info").json()["server"] == "nodestep"
    assert http.get("/ui/static/sandbox.js").headers["content-type"].startswith("text/javascript")


def test_an_unknown_graph_or_a_bad_filter_is_a_page_that_says_what_to_do(
    http: TestClient,
) -> None:
    missing = http.get("/ui/graphs/nope")
    assert missing.status_code == 404
    assert "No graph is named &#39;nope&#39;; the sandbox serves chat, pricing." in missing.text
    status = http.get("/ui/threads", params={"status": "done"})
    assert status.status_code == 400
    assert "use one of idle, busy, interrupted, error" in status.text
    offset = http.get("/ui/threads", params={"offset": "ten"})
    assert offset.status_code == 400 and "fix the link" in offset.text


def test_the_browser_api_only_reads(http: TestClient) -> None:
    assert http.post("/ui/api/threads", json={}).status_code == 405
    assert http.get(f"/ui/api/threads/{uuid.UUID(int=0)}").status_code == 404


def test_a_post_without_the_csrf_token_is_refused(http: TestClient) -> None:
    refused = http.post("/ui/graphs/pricing/runs", data={"field.note": "x"})
    assert refused.status_code == 403
    assert "reload the page and send it again" in refused.text


def test_a_host_the_sandbox_does_not_serve_is_refused(http: TestClient) -> None:
    assert http.get("/ui", headers={"host": "evil.example"}).status_code == 400


def test_a_run_from_the_form_lands_on_its_live_view(http: TestClient) -> None:
    form = {"csrf": _csrf(http), "field.items": '["tea"]', "metadata": "shop=north"}
    started = http.post("/ui/graphs/pricing/runs", data=form, follow_redirects=False)
    assert started.status_code == 303
    live = http.get(started.headers["location"])
    assert 'data-stream="/ui/api/threads/' in live.text
    thread_id = started.headers["location"].split("/")[3]
    http.get(f"/threads/{thread_id}/runs/{started.headers['location'].split('/')[5]}/join")
    listed = http.get("/ui/threads", params={"metadata": "shop=north"}).text
    assert thread_id in listed
    assert thread_id not in http.get("/ui/threads", params={"metadata": "shop=south"}).text


def test_metadata_and_state_values_are_escaped_on_every_page(http: TestClient) -> None:
    attack = "<script>alert(1)</script>"
    form = {"csrf": _csrf(http), "field.note": attack, "metadata": f"who={attack}"}
    started = http.post("/ui/graphs/pricing/runs", data=form, follow_redirects=False)
    thread_id, run_id = started.headers["location"].split("/")[3::2]
    http.get(f"/threads/{thread_id}/runs/{run_id}/join")
    for page in (f"/ui/threads/{thread_id}", "/ui/threads"):
        text = http.get(page).text
        assert "<script>alert" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_a_thread_with_no_history_shows_an_empty_state(http: TestClient) -> None:
    page = http.get("/ui/threads/never-ran").text
    assert "No events yet." in page and "This thread has no state yet." in page


def test_only_graphs_and_agents_are_served_each_under_one_name() -> None:
    with pytest.raises(GraphConfigError, match="The sandbox serves graphs; got int"):
        create_app([3], store=InMemoryStateStore())
    with pytest.raises(GraphConfigError, match="Two graphs are named 'pricing'"):
        create_app([pricing, pricing], store=InMemoryStateStore())


def test_the_server_threads_come_a_page_at_a_time(http: TestClient) -> None:
    for n in range(51):
        http.post("/threads", json={"metadata": {"n": n}})
    first = http.get("/ui/threads").text
    assert first.count("<tr>") == 51  # the header and 50 threads
    assert "Newer threads" not in first
    older = re.search(r'href="(/ui/threads\?[^"]+)">Older threads', first)
    assert older is not None
    second = http.get(older.group(1).replace("&amp;", "&")).text
    assert second.count("<tr>") == 2 and "Newer threads" in second


def test_the_store_page_lists_threads_the_server_never_saw() -> None:
    store = InMemoryStateStore()
    pricing.invoke({}, thread_id="by-script", state_store=store)
    with TestClient(create_app([pricing], store=store), base_url="http://127.0.0.1") as http:
        _store_page_lists(http)


def _store_page_lists(http: TestClient) -> None:
    page = http.get("/ui/store", params={"status": "completed"}).text
    assert 'href="/ui/threads/by-script"' in page
    assert "No thread matches." in http.get("/ui/store", params={"status": "paused"}).text
    bad = http.get("/ui/store", params={"status": "done"})
    assert bad.status_code == 400 and "use one of completed, paused, unfinished" in bad.text


def test_a_store_given_by_url_gets_its_memory_store_beside_it_as_the_server_does(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'threads.db'}"
    app = create_app([pricing], store=url)
    with TestClient(app, base_url="http://127.0.0.1:2024") as client:
        assert client.get("/info").json()["flags"]["store"] is True
        item = {"namespace": ["notes"], "key": "k", "value": {"text": "kept"}}
        assert client.put("/store/items", json=item).status_code in (200, 204)
    assert (tmp_path / "threads.memory.db").exists()
    with TestClient(create_app([pricing], store=url), base_url="http://127.0.0.1:2024") as again:
        found = again.get("/store/items", params={"namespace": "notes", "key": "k"})
        assert found.json()["value"] == {"text": "kept"}


def test_a_store_given_as_an_object_has_no_memory_store_unless_one_is_named() -> None:
    from nodestep.memory import InMemoryMemoryStore

    bare = create_app([pricing], store=InMemoryStateStore())
    with TestClient(bare, base_url="http://127.0.0.1:2024") as client:
        assert client.get("/info").json()["flags"]["store"] is False
    named = create_app([pricing], store=InMemoryStateStore(), memory=InMemoryMemoryStore())
    with TestClient(named, base_url="http://127.0.0.1:2024") as client:
        assert client.get("/info").json()["flags"]["store"] is True


def test_a_chat_message_starts_a_run_the_page_follows_then_shows_its_end() -> None:
    from sandbox_graphs import support

    app = create_app({"support": support}, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        csrf = _csrf(http, "/ui/agents/support")
        form = {"csrf": csrf, "message": "Where is my order 1042?"}
        sent = http.post("/ui/agents/support/messages", data=form, follow_redirects=False)
        assert sent.status_code == 303
        found = re.fullmatch(
            r"/ui/agents/support\?thread=([0-9a-f-]+)&run=([0-9a-f-]+)", sent.headers["location"]
        )
        assert found is not None, sent.headers["location"]
        thread_id, run_id = found.groups()
        page = http.get(sent.headers["location"]).text
        stream = f"/ui/api/threads/{thread_id}/runs/{run_id}/stream"
        assert f'data-stream="{stream}"' in page
        assert 'id="reply-status"' in page and '<button type="submit" disabled>' in page
        # What the page's script follows: the reply's tokens, then the stream's end.
        with http.stream("GET", stream) as answer:
            text = answer.read().decode()
        tokens = [
            json.loads(line[len("data: ") :])[0]["content"]
            for line in text.splitlines()
            if line.startswith("data: [")
        ]
        assert "".join(tokens) == "Your order shipped on Monday."
        settled = http.get("/ui/agents/support", params={"thread": thread_id}).text
        assert 'id="live-reply"' not in settled and "Your order shipped on Monday." in settled
        # A run that is not the thread's is a page saying so, not a live view of nothing.
        other = http.get(
            "/ui/agents/support", params={"thread": thread_id, "run": str(uuid.UUID(int=1))}
        )
        assert other.status_code == 404 and "not found" in other.text.lower()
        bad = http.get("/ui/agents/support", params={"thread": thread_id, "run": "x/../y"})
        assert bad.status_code == 400 and "is not a run&#39;s id (a UUID)" in bad.text


def _alert(page: str) -> str:
    found = re.search(r'<p role="alert" class="error">(.*?)</p>', page, re.S)
    assert found is not None, page
    return found.group(1).replace("&#39;", "'")


def _event_link(page: str, kind: str) -> str:
    """Return the link of the newest event of a kind on a thread's page."""
    link = rf'<a href="([^"]+)"[^>]*><span class="seq">#\d+</span> <span class="type">{kind}<'
    found = re.search(link, page)
    assert found is not None, kind
    return found.group(1).replace("&amp;", "&")


def _support(replies: list[str]) -> Agent:
    """The support agent of ``sandbox_graphs``, with a model of its own script."""
    specs = Path(__file__).with_name("specs")
    model = ScriptedModel(replies)
    functions = {"shop.get_order": get_order}
    return Agent(specs, start_node="chat", llm=model, functions=functions, name="support")


def _say(http: TestClient, text: str, thread_id: str = "") -> str:
    """Send a message from the chat page; wait for the reply; return the thread's id."""
    form = {"csrf": _csrf(http, "/ui/agents/support"), "message": text, "thread": thread_id}
    sent = http.post("/ui/agents/support/messages", data=form, follow_redirects=False)
    asked = parse_qs(urlsplit(sent.headers["location"]).query)
    thread, run = asked["thread"][0], asked["run"][0]
    http.get(f"/threads/{thread}/runs/{run}/join")
    return thread


def test_the_chat_shows_the_branch_the_server_runs_after_a_fork() -> None:
    app = create_app({"support": _support(["Hello."])}, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        thread = _say(http, "Anyone there?")
        oldest = http.post(f"/threads/{thread}/history", json={"limit": 100}).json()[-1]
        fork = {"values": {}, "checkpoint_id": oldest["checkpoint"]["checkpoint_id"]}
        assert http.post(f"/threads/{thread}/state", json=fork).status_code == 200
        _say(http, "Are you still there?", thread)
        page = http.get("/ui/agents/support", params={"thread": thread}).text
        assert "Are you still there?" in page
        assert "Anyone there?" not in page  # the fork was made before it was sent


def test_a_fork_where_a_run_paused_waits_at_the_same_interrupt() -> None:
    app = create_app([refund], store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        paused = {"assistant_id": "refund", "input": {"amount": 120}}
        http.post(f"/threads/{thread}/runs/wait", json=paused)
        event = http.get(_event_link(http.get(f"/ui/threads/{thread}").text, "run_paused")).text
        at = re.search(r'name="at" value="([^"]+)"', event)
        assert at is not None
        csrf = _csrf(http, "/ui/graphs/refund")
        form = {"csrf": csrf, "at": at.group(1), "value.amount": "5"}
        forked = http.post(f"/ui/threads/{thread}/fork", data=form, follow_redirects=False)
        assert forked.status_code == 303
        assert forked.headers["location"] == f"/ui/threads/{thread}#interrupts"
        row = http.get(f"/threads/{thread}").json()
        assert row["status"] == "interrupted" and row["branch_id"] != "main"
        assert len(http.get(f"/threads/{thread}/runs").json()) == 1  # no run: nothing failed
        page = http.get(forked.headers["location"]).text
        assert 'id="interrupts"' in page and "Pay out 120?" in page
        answer = {"csrf": csrf, "answer.approve:approval": "yes"}
        resumed = http.post(f"/ui/threads/{thread}/resume", data=answer, follow_redirects=False)
        http.get(resumed.headers["location"].removeprefix("/ui") + "/join")
        state = http.get(f"/threads/{thread}/state").json()["values"]
        assert state == {"amount": 5, "status": "approved"}


ODD_IDS = ["t-1", "order#42", "shop/north/7", "what?1", "100%", "a b", "caf\u00e9"]


def test_every_link_escapes_ids_and_opens_the_thread_it_names() -> None:
    store = InMemoryStateStore()
    for thread_id in ODD_IDS:
        pricing.invoke({"items": ["x"], "note": thread_id}, thread_id=thread_id, state_store=store)
    app = create_app({"price list/2": pricing}, store=store)
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        links = re.findall(r'<td><a href="(/ui/threads/[^"]+)">', http.get("/ui/store").text)
        assert len(links) == len(ODD_IDS)
        for link in links:
            thread = http.get(link).text
            shown = re.search(r"<h1>Thread <code>(.*?)</code></h1>", thread)
            assert shown is not None and shown.group(1).replace("&amp;", "&") in ODD_IDS
            assert f"&#34;{shown.group(1)} (total 3)&#34;" in thread  # its state, not an empty one
            event = http.get(_event_link(thread, "checkpoint")).text
            assert "State after event" in event and f"<code>{shown.group(1)}</code>" in event
            trace = re.search(r'<dt><a href="([^"]+)"', event)
            assert trace is not None
            assert "Who wrote" in http.get(trace.group(1).replace("&amp;", "&")).text
        graph = re.search(r'<a href="(/ui/graphs/[^"]+)">price list/2<', http.get("/ui").text)
        assert graph is not None and graph.group(1) == "/ui/graphs/price%20list%2F2"
        assert 'action="/ui/graphs/price%20list%2F2/runs"' in http.get(graph.group(1)).text


def test_a_thread_id_ending_like_a_sub_page_is_still_the_thread() -> None:
    store = InMemoryStateStore()
    pricing.invoke({"note": "x/diff"}, thread_id="x/diff", state_store=store)
    with TestClient(create_app([pricing], store=store), base_url="http://127.0.0.1") as http:
        page = http.get("/ui/threads/x%2Fdiff").text
        assert "<h1>Thread <code>x/diff</code></h1>" in page
        diff = http.get("/ui/threads/x/diff", follow_redirects=False)
        assert diff.headers["location"] == "/ui/threads/x"  # the diff of thread "x", no b=


def test_the_chat_of_a_thread_of_another_graph_says_whose_it_is() -> None:
    from sandbox_graphs import support

    app = create_app({"support": support, "pricing": pricing}, store=InMemoryStateStore())
    with TestClient(app, base_url="http://127.0.0.1:2024") as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        run = {"assistant_id": "pricing", "input": {"items": ["a"]}}
        http.post(f"/threads/{thread}/runs/wait", json=run)
        page = http.get("/ui/agents/support", params={"thread": thread})
        assert page.status_code == 409
        assert _alert(page.text) == (
            f"Thread '{thread}' belongs to graph 'pricing': it holds another graph's state, "
            f"not a conversation of agent 'support'. Open it on its thread page "
            f"(/ui/threads/{thread}), or start a new conversation (/ui/agents/support)."
        )


def test_the_server_records_thread_is_no_graph_thread_of_the_pages() -> None:
    store = InMemoryStateStore()
    with TestClient(create_app([pricing], store=store), base_url="http://127.0.0.1") as http:
        thread = http.post("/threads", json={}).json()["thread_id"]
        http.post(f"/threads/{thread}/runs/wait", json={"assistant_id": "pricing", "input": {}})
        listed = http.get("/ui/store").text
        assert f'href="/ui/threads/{thread}"' in listed and "nodestep-serve" not in listed
        for page in ("/ui/threads/nodestep-serve", "/ui/threads/nodestep-serve/diff?b=x"):
            opened = http.get(page)
            assert opened.status_code == 404
            assert _alert(opened.text).startswith(
                "Thread 'nodestep-serve' holds the server's own records (each thread's "
                "metadata, status and shown branch, and each run), not the history of a graph"
            )
            assert "damaged" not in opened.text
