"""A failed run's stored message holds no secret of its context, and passes the graph's redact=."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretBytes, SecretStr

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    NodeContext,
    NodeTimeoutError,
    node,
)
from nodestep._engine.redact import MASK, secret_texts
from store_helpers import open_file

pytestmark = pytest.mark.anyio

KEY = "sk-live-5f1d0c9a"


class S(BaseState):
    count: int = 0


class Settings(BaseModel):
    api_key: SecretStr
    user: str = "ann"


@dataclasses.dataclass
class Deps:
    settings: Settings
    tokens: dict[str, SecretStr] = dataclasses.field(default_factory=dict)


@node
async def call_api(state: S, ctx: NodeContext) -> dict[str, Any]:
    raise PermissionError(f"key={ctx.context.settings.api_key.get_secret_value()} refused")


@node
def call_api_sync(state: S, ctx: NodeContext) -> dict[str, Any]:
    raise PermissionError(f"key={ctx.context.settings.api_key.get_secret_value()} refused")


def deps() -> Deps:
    return Deps(Settings(api_key=SecretStr(KEY)))


async def failed_run(
    graph: Graph[Any], context: Any, error: type[BaseException], message: str
) -> None:
    """Run ``graph`` on thread ``t``; it must raise ``error`` with exactly ``message``."""
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        await graph.ainvoke({}, thread_id="t", context=context)


@pytest.mark.parametrize("failing", [call_api, call_api_sync], ids=["async", "def"])
async def test_a_context_secret_in_a_node_error_never_reaches_the_file(
    failing: Any, tmp_path: Path
):
    store = open_file(tmp_path / "h.jsonl")
    graph = Graph(S, state_store=store).flow(START >> failing, failing >> END)
    # The caller's exception is the node's own, secret and all.
    await failed_run(graph, deps(), PermissionError, f"key={KEY} refused")
    data = store.path.read_bytes()
    assert KEY.encode() not in data
    assert f"key={MASK} refused".encode() in data
    snapshot = await graph.get_state("t")
    assert snapshot.error_message == f"key={MASK} refused"
    reloaded = Graph(S, state_store=open_file(store.path)).flow(START >> failing, failing >> END)
    assert (await reloaded.get_state("t")).error_message == f"key={MASK} refused"


@pytest.mark.parametrize(
    "context",
    [
        {"outer": {"key": SecretStr(KEY)}},
        [Settings(api_key=SecretStr(KEY))],
        Deps(Settings(api_key=SecretStr("other")), {"svc": SecretStr(KEY)}),
        Settings(api_key=SecretStr(KEY)),
    ],
    ids=["dict-in-dict", "model-in-list", "dict-in-dataclass", "model"],
)
async def test_secrets_are_found_in_models_dataclasses_and_containers(context: Any):
    assert KEY in secret_texts(context)


def test_secret_bytes_are_masked_as_text_and_as_bytes_repr():
    texts = secret_texts({"raw": SecretBytes("clé-9".encode())})
    assert texts == ["cl\\xc3\\xa9-9", "clé-9"]


def test_secrets_are_masked_longest_first_and_an_empty_secret_is_ignored():
    assert secret_texts([SecretStr("ab"), SecretStr("abcd"), SecretStr("")]) == ["abcd", "ab"]


def test_the_walk_of_the_context_stops_at_its_depth():
    deep: Any = SecretStr(KEY)
    for _ in range(5):
        deep = {"next": deep}
    assert secret_texts(deep) == []


@pytest.mark.parametrize("failing", [call_api, call_api_sync], ids=["async", "def"])
async def test_redact_hook_rewrites_the_stored_message_after_the_secrets_are_masked(
    failing: Any, tmp_path: Path
):
    seen: list[str] = []

    def redact(message: str) -> str:
        seen.append(message)
        return re.sub(r"refused", "[policy]", message)

    store = open_file(tmp_path / "h.jsonl")
    graph = Graph(S, state_store=store, redact=redact).flow(START >> failing, failing >> END)
    await failed_run(graph, deps(), PermissionError, f"key={KEY} refused")
    assert seen == [f"key={MASK} refused"]
    assert (await graph.get_state("t")).error_message == f"key={MASK} [policy]"
    assert b"refused" not in store.path.read_bytes()


async def test_redact_hook_sees_node_timeout_messages_too(tmp_path: Path):
    @node(timeout=0.01)
    def slow(state: S) -> dict[str, Any]:
        time.sleep(0.03)  # real time: a thread that runs past its node's timeout of 0.01 s
        return {}

    store = open_file(tmp_path / "h.jsonl")
    graph = Graph(S, state_store=store, redact=lambda m: m.replace("slow", "<node>"))
    graph.flow(START >> slow, slow >> END)
    await failed_run(
        graph,
        None,
        NodeTimeoutError,
        "Node 'slow' timed out after 0.01s; give it a longer @node(timeout=...) if it needs "
        "one, or a retry=RetryPolicy(...) to try again",
    )
    snapshot = await graph.get_state("t")
    assert snapshot.error_type == "NodeTimeoutError"
    assert snapshot.error_message == (
        "Node '<node>' timed out after 0.01s; give it a longer @node(timeout=...) if it "
        "needs one, or a retry=RetryPolicy(...) to try again"
    )


async def test_a_context_secret_in_a_timeout_error_of_a_node_is_masked(tmp_path: Path):
    @node(timeout=5)
    async def wrapped(state: S, ctx: NodeContext) -> dict[str, Any]:
        key = ctx.context.settings.api_key.get_secret_value()
        raise TimeoutError(f"gave up calling with {key}")

    store = open_file(tmp_path / "h.jsonl")
    graph = Graph(S, state_store=store).flow(START >> wrapped, wrapped >> END)
    await failed_run(graph, deps(), TimeoutError, f"gave up calling with {KEY}")
    assert KEY.encode() not in store.path.read_bytes()
    assert (await graph.get_state("t")).error_message == f"gave up calling with {MASK}"


async def test_a_redact_hook_that_raises_withholds_the_message_and_the_node_error_still_raises():
    def redact(message: str) -> str:
        raise RuntimeError("bug in the hook")

    graph = Graph(S, state_store=InMemoryStateStore(), redact=redact)
    graph.flow(START >> call_api, call_api >> END)
    await failed_run(graph, deps(), PermissionError, f"key={KEY} refused")
    assert (await graph.get_state("t")).error_message == (
        "(message withheld: the graph's redact= raised RuntimeError)"
    )


async def test_a_redact_hook_that_returns_no_string_withholds_the_message():
    graph = Graph(S, state_store=InMemoryStateStore(), redact=lambda m: None)  # type: ignore[arg-type,return-value]
    graph.flow(START >> call_api, call_api >> END)
    await failed_run(graph, deps(), PermissionError, f"key={KEY} refused")
    assert (await graph.get_state("t")).error_message == (
        "(message withheld: the graph's redact= returned NoneType, not str)"
    )


def test_redact_must_be_callable():
    with pytest.raises(GraphConfigError, match=r"redact must be a function .* got str"):
        Graph(S, redact="key")  # type: ignore[arg-type]
