"""The gate: token, Host, Origin and CORS, body size and JSON depth; in process."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from serve_graphs import GRAPHS
from starlette.testclient import TestClient

from nodestep import GraphConfigError, InMemoryStateStore
from nodestep.serve import bind_access, create_app, serve

TOKEN = "s3cret-token"
BASE = "http://127.0.0.1:2024"


@pytest.fixture
def app_client() -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore(), token=TOKEN)
    with TestClient(app, base_url=BASE) as client:
        yield client


@pytest.fixture
def open_client() -> Iterator[TestClient]:
    app = create_app(GRAPHS, store=InMemoryStateStore(), max_body=10 * 1024 * 1024)
    with TestClient(app, base_url=BASE) as client:
        yield client


def test_a_request_without_the_token_or_with_a_wrong_one_is_401(app_client: TestClient) -> None:
    assert app_client.get("/info").status_code == 401
    wrong = app_client.get("/info", headers={"x-api-key": "guess"})
    assert wrong.status_code == 401
    assert "x-api-key" in wrong.json()["detail"]
    assert app_client.get("/info", headers={"x-api-key": TOKEN}).status_code == 200
    assert app_client.get("/info", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert app_client.get("/ok").status_code == 200  # health checks need no token


def test_a_host_header_of_another_name_is_refused(open_client: TestClient) -> None:
    refused = open_client.get("/info", headers={"Host": "attacker.example"})
    assert refused.status_code == 400
    assert open_client.get("/info", headers={"Host": "localhost:2024"}).status_code == 200


def test_a_foreign_origin_is_refused_and_a_local_one_gets_cors_headers(
    open_client: TestClient,
) -> None:
    refused = open_client.get("/info", headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403
    assert "--cors-origin" in refused.json()["detail"]
    allowed = open_client.post("/threads", json={}, headers={"Origin": "http://localhost:3000"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "content-location" in allowed.headers["access-control-expose-headers"]


def test_a_preflight_is_answered_without_a_token(app_client: TestClient) -> None:
    preflight = app_client.options(
        "/threads",
        headers={
            "Origin": "http://127.0.0.1:5173",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-api-key",
        },
    )
    assert preflight.status_code == 204
    allowed = preflight.headers["access-control-allow-headers"]
    assert "content-type" in allowed and "x-api-key" in allowed


def test_an_origin_given_to_the_app_is_allowed() -> None:
    app = create_app(GRAPHS, store=InMemoryStateStore(), cors_origins=["https://chat.example"])
    with TestClient(app, base_url=BASE) as client:
        answer = client.get("/info", headers={"Origin": "https://chat.example"})
    assert answer.status_code == 200


def test_a_five_megabyte_body_is_accepted_and_one_past_the_limit_is_413(
    open_client: TestClient,
) -> None:
    big = {"metadata": {"blob": "x" * (5 * 1024 * 1024)}}
    assert open_client.post("/threads", json=big).status_code == 200
    huge = {"metadata": {"blob": "x" * (11 * 1024 * 1024)}}
    refused = open_client.post("/threads", json=huge)
    assert refused.status_code == 413
    assert "larger than" in refused.json()["detail"]


def test_json_nested_past_the_depth_limit_is_422(open_client: TestClient) -> None:
    deep: object = 1
    for _ in range(150):
        deep = [deep]
    refused = open_client.post(
        "/threads",
        content=orjson.dumps({"metadata": {"d": deep}}),
        headers={"content-type": "application/json"},
    )
    assert refused.status_code == 422
    assert "deeper than 100" in refused.json()["detail"]


def test_a_malformed_thread_id_is_422_and_names_the_id(open_client: TestClient) -> None:
    answer = open_client.get("/threads/../../etc/passwd")
    assert answer.status_code in (404, 422)
    answer = open_client.get("/threads/not-a-uuid")
    assert answer.status_code == 422
    assert "'not-a-uuid'" in answer.json()["detail"]


def test_serving_off_loopback_without_a_token_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODESTEP_API_TOKEN", raising=False)
    with pytest.raises(GraphConfigError, match="token"):
        serve(GRAPHS, store="memory:", host="0.0.0.0")


def test_the_sandbox_off_loopback_without_a_token_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nodestep.sandbox import serve as serve_sandbox

    monkeypatch.delenv("NODESTEP_API_TOKEN", raising=False)
    with pytest.raises(GraphConfigError, match=r"'10\.0\.0\.7'.*--token or NODESTEP_API_TOKEN"):
        serve_sandbox(GRAPHS, store="memory:", host="10.0.0.7")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_bind_access_on_loopback_keeps_the_local_names(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODESTEP_API_TOKEN", raising=False)
    assert bind_access(host, None) == (None, [])
    assert bind_access(host, "") == (None, [])
    assert bind_access(host, "t0k") == ("t0k", [])


def test_bind_access_off_loopback_needs_a_token_and_takes_any_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NODESTEP_API_TOKEN", raising=False)
    with pytest.raises(GraphConfigError) as refused:
        bind_access("0.0.0.0", None)
    message = str(refused.value)
    assert "'0.0.0.0'" in message and "read the threads" in message
    assert "--token or NODESTEP_API_TOKEN" in message and "bind 127.0.0.1" in message
    assert bind_access("0.0.0.0", "t0k") == ("t0k", ["*"])
    monkeypatch.setenv("NODESTEP_API_TOKEN", "from-env")
    assert bind_access("0.0.0.0", None) == ("from-env", ["*"])
    assert bind_access("127.0.0.1", None) == ("from-env", [])
    assert bind_access("0.0.0.0", "given") == ("given", ["*"])
