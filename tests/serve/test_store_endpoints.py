"""The long-term memory store endpoints through langgraph-sdk's ``client.store``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from serve_process import running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's async client runs on asyncio


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("serve")) / "threads.db"


@pytest.fixture(scope="module")
def url(store_path: Path) -> Iterator[str]:
    with running(f"sqlite:///{store_path}") as base:
        yield base


@pytest.fixture
async def client(url: str) -> AsyncIterator[LangGraphClient]:
    async with get_client(url=url) as opened:
        yield opened


async def test_an_item_is_put_got_searched_and_deleted(client: LangGraphClient) -> None:
    await client.store.put_item(["prefs", "ada"], "theme", {"color": "teal", "size": 3})
    await client.store.put_item(["prefs", "ada"], "lang", {"code": "en", "size": 1})
    item = await client.store.get_item(["prefs", "ada"], "theme")
    assert item is not None
    assert (item["namespace"], item["key"], item["value"]) == (
        ["prefs", "ada"],
        "theme",
        {"color": "teal", "size": 3},
    )
    assert item["created_at"] and item["updated_at"]
    found = await client.store.search_items(["prefs"], filter={"size": {"$gt": 2}})
    assert [i["key"] for i in found["items"]] == ["theme"]
    assert found["items"][0]["score"] is None
    page = await client.store.search_items(["prefs", "ada"], limit=1, offset=1)
    assert [i["key"] for i in page["items"]] == ["theme"]
    await client.store.delete_item(["prefs", "ada"], "theme")
    assert await client.store.get_item(["prefs", "ada"], "theme") is None


async def test_namespaces_are_listed_by_prefix_suffix_and_depth(client: LangGraphClient) -> None:
    for ns in (["org", "a", "users"], ["org", "b", "users"], ["org", "b", "teams"]):
        await client.store.put_item(ns, "k", {"v": 1})
    listed = await client.store.list_namespaces(prefix=["org"], suffix=["users"])
    assert listed["namespaces"] == [["org", "a", "users"], ["org", "b", "users"]]
    cut = await client.store.list_namespaces(prefix=["org"], max_depth=2)
    assert cut["namespaces"] == [["org", "a"], ["org", "b"]]


async def test_a_runs_nodes_write_the_store_the_endpoints_read(client: LangGraphClient) -> None:
    values = await client.runs.wait(None, "notes", input={"user": "bo", "text": "buy milk"})
    assert values["count"] == 1
    item = await client.store.get_item(["notes", "bo"], "last")
    assert item is not None and item["value"] == {"text": "buy milk"}


async def test_bad_namespaces_keys_and_values_are_422_naming_them(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        dotted = {"namespace": ["a.b"], "key": "k", "value": {}}  # the SDK refuses it too
        answer = await http.put("/store/items", json=dotted)
        assert answer.status_code == 422 and "'a.b'" in answer.json()["detail"]
        answer = await http.put("/store/items", json={"namespace": ["a"], "key": "k", "value": 3})
        assert answer.status_code == 422 and "value" in str(answer.json()["detail"])
        answer = await http.get("/store/items", params={"namespace": "a"})
        assert answer.status_code == 422 and "'key'" in answer.json()["detail"]
        bad = {"prefix": ["a"], "max_depth": 0}
        answer = await http.post("/store/namespaces", json=bad)
        assert answer.status_code == 422 and "max_depth" in answer.json()["detail"]


async def test_the_items_outlast_the_server_in_a_file_beside_its_store(
    client: LangGraphClient, store_path: Path
) -> None:
    await client.store.put_item(["kept"], "k", {"v": 2})
    assert (store_path.parent / "threads.memory.db").exists()
    with running(f"sqlite:///{store_path}") as other:
        async with get_client(url=other) as second:
            item = await second.store.get_item(["kept"], "k")
    assert item is not None and item["value"] == {"v": 2}


async def test_a_query_without_embeddings_answers_the_prefix_matches_unranked(
    client: LangGraphClient,
) -> None:
    await client.store.put_item(["teas", "ada"], "green", {"text": "sencha"})
    found = await client.store.search_items(["teas"], query="a grassy tea")
    assert [(item["key"], item["score"]) for item in found["items"]] == [("green", None)]
