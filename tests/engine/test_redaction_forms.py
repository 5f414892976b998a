"""No form of a context secret reaches a store's bytes, a stream event or a log, on any store.

A node's error may show a secret other than as it is: URL-quoted in a URL, JSON-escaped in
a response body, lowercased, or as HTTP Basic credentials (``user:password``, the password
alone, or their base64). Every byte each store wrote is searched for every such form, as
are the stream's events and the log records.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import orjson
import pytest
from pydantic import SecretStr

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    NodeContext,
    PostgresStateStore,
    SQLiteStateStore,
    export_thread,
    failed,
    node,
    when,
)
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio

PASSWORD = "Hunter2/Pass word+Ü:9"
USER = "ann"


class Vault:
    """A plain object (no pydantic, no dataclass) holding the secret two levels down."""

    def __init__(self) -> None:
        self.inner = Keys()
        self.label = "vault"

    @property
    def boom(self) -> str:  # never read: the walk must run no code of the context
        raise AssertionError("the walk ran a property")


class Keys:
    __slots__ = ("basic", "password")

    def __init__(self) -> None:
        self.password = SecretStr(PASSWORD)
        self.basic = SecretStr(f"{USER}:{PASSWORD}")


def forms(secret: str = PASSWORD) -> dict[str, str]:
    """Every form of the secret a message might show, by name."""
    basic = f"{USER}:{secret}".encode()
    return {
        "plain": secret,
        "quote": quote(secret),
        "quote_safe": quote(secret, safe=""),
        "quote_plus": quote_plus(secret),
        "json": json.dumps(secret)[1:-1],
        "json_utf8": json.dumps(secret, ensure_ascii=False)[1:-1],
        "lower": secret.lower(),
        "upper": secret.upper(),
        "user_password": f"{USER}:{secret}",
        "base64": base64.b64encode(secret.encode()).decode(),
        "basic_base64": base64.b64encode(basic).decode(),
        "basic_urlsafe": base64.urlsafe_b64encode(basic).decode(),
    }


class S(BaseState):
    count: int = 0


@node
async def leak(state: S, ctx: NodeContext) -> dict[str, Any]:
    shown = " | ".join(f"{name}={form}" for name, form in forms().items())
    logging.getLogger("nodestep.test").info("about to fail")
    raise PermissionError(f"GET https://{USER}:{quote(PASSWORD)}@api.example/ refused: {shown}")


def _leaks(data: bytes, where: str) -> list[str]:
    """Name the forms found in ``data`` (letter case ignored), as ``where: form``."""
    text = data.decode("utf-8", "backslashreplace").lower()
    found = [name for name, form in forms().items() if form.lower() in text]
    return [f"{where}: {name}" for name in found]


async def _stored_bytes(store: StateStore, tmp_path: Path) -> dict[str, bytes]:
    """Every byte the store wrote: its files, or its rows, by where they are."""
    if isinstance(store, FilesystemStateStore | SQLiteStateStore):
        await store.aclose()  # so SQLite's log and the file store's index are written out
        return {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    if isinstance(store, PostgresStateStore):
        import psycopg

        tables = ["nodestep_events", "nodestep_branches", "nodestep_leases", "nodestep_meta"]
        out = {}
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            rows = conn.execute(f'SELECT line FROM "{store.schema}".nodestep_events').fetchall()
            out["nodestep_events.line"] = b"\n".join(bytes(r[0]) for r in rows)
            for table in tables:
                sql = f'SELECT t::text FROM "{store.schema}".{table} t'
                out[table] = "\n".join(r[0] for r in conn.execute(sql)).encode()
        return out
    assert isinstance(store, InMemoryStateStore)
    return {"memory": orjson.dumps(await export_thread(store, "t"))}


async def test_no_form_of_a_context_secret_is_stored_streamed_or_logged(
    store: StateStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    graph = Graph(S, state_store=store).flow(START >> leak, leak >> END)
    events = []
    with pytest.raises(PermissionError) as raised:
        async for event in graph.astream(
            {}, thread_id="t", context=Vault(), stream_mode=["debug", "updates", "task_updates"]
        ):
            events.append(event)
    assert PASSWORD in str(raised.value)  # the caller's own error is left as it is
    stored = await graph.history("t")
    failed = [e for e in stored.events if e.type == "run_failed"]
    assert len(failed) == 1 and "refused" in failed[0].data["message"]
    leaks = [leak for where, data in (await _stored_bytes(store, tmp_path)).items()
             for leak in _leaks(data, where)]  # fmt: skip
    leaks += _leaks(repr(events).encode(), "stream events")
    leaks += _leaks("\n".join(r.getMessage() for r in caplog.records).encode(), "logs")
    assert leaks == []


async def test_an_error_route_masks_every_form_in_history_and_its_task_updates_event(
    store: StateStore, tmp_path: Path
) -> None:
    @node
    def handled(state: S) -> dict[str, Any]:
        return {"count": 1}

    graph = Graph(S, state_store=store).flow(
        START >> leak, leak >> when(failed(PermissionError), handled, otherwise=END), handled >> END
    )
    events = [
        e
        async for e in graph.astream({}, thread_id="t", context=Vault(), stream_mode="task_updates")
    ]
    assert events[-1].data.state.count == 1
    leaks = [leak for where, data in (await _stored_bytes(store, tmp_path)).items()
             for leak in _leaks(data, where)]  # fmt: skip
    assert leaks + _leaks(repr(events).encode(), "stream events") == []
