"""What an agent masks of the context besides strings and numbers: values of any kind
that print themselves (a UUID, a date, an enum member), and a tool's last failure, which
its breaker keeps for later steps."""

from __future__ import annotations

import datetime
import decimal
import enum
import ipaddress
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import pytest
from specs_helpers import write

from nodestep import (
    Agent,
    Credentials,
    CredentialsProvider,
    FilesystemStateStore,
    NodeContext,
    ScriptedModel,
    SQLiteStateStore,
)
from nodestep.agents import ScriptedReply
from nodestep.agents._specs.masking import texts_of

STOCK = """
kind: LLMNode
name: chat
tools: [stock]
---
kind: ToolNode
name: stock
description: Items in stock
func: shop.stock
circuit_breaker: {failures: 1, cooldown: 60, on: ConnectionError}
"""


def _store(tmp_path: Path, kind: str) -> FilesystemStateStore | SQLiteStateStore:
    if kind == "file":
        return FilesystemStateStore(tmp_path / "h.jsonl")
    return SQLiteStateStore(tmp_path / "h.db")


def _written(tmp_path: Path, store: Any) -> bytes:
    anyio.run(store.aclose)
    return b"".join(
        p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "specs" not in p.parts
    )


def _refusal(last: str) -> str:
    return (
        f"Error: stock was not called: its circuit breaker opened after it failed (last: "
        f"{last}), and lets a trial call through in 60s. Answer without it until then."
    )


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_breakers_refusal_shows_no_context_of_the_step_that_opened_it(tmp_path: Path, kind: str):
    # The breaker is the Agent's: its refusal in bob's conversation quotes the failure of
    # alice's step, which must not carry alice's context there.
    def stock(ctx: NodeContext) -> str:
        raise ConnectionError(f"the shop refused key {ctx.context['api_key']}")

    store = _store(tmp_path, kind)
    model = ScriptedModel([ScriptedReply(tool_calls=[("stock", {})]), "Sorry."])
    agent = Agent(
        write(tmp_path, {"chat.yaml": STOCK}),
        "chat",
        llm=model,
        functions={"shop.stock": stock},
        state_store=store,
    )
    alice = agent.step_sync("Any?", context={"api_key": "key-alice-77f3"}, execution_id="a")
    assert model.calls[-1][-1].content == (
        "Error: stock raised ConnectionError: the shop refused key [context]"
    )
    bob = agent.step_sync("Any?", context={"api_key": "key-bob-0001"}, execution_id="b")
    assert (alice.status, bob.status) == ("completed", "completed")
    refusal = _refusal("ConnectionError: the shop refused key [context]")
    assert model.calls[-1][-1].content == refusal
    assert agent.node_state_sync("stock", execution_id="b").error == refusal
    assert b"key-alice-77f3" not in _written(tmp_path, store)


def test_a_breakers_refusal_shows_no_credential_of_the_step_that_opened_it(tmp_path: Path):
    secret = "tok-51d0e-secret"

    def stock(token: Credentials) -> str:
        raise ConnectionError(f"reset; headers: Authorization: Bearer {token.secret()}")

    account = "---\nkind: ServiceAccount\nname: shop_api\ncredentials_provider: shop-token\n"
    spec = STOCK + "auth: {service_account: shop_api}\n" + account
    store = _store(tmp_path, "file")
    model = ScriptedModel([ScriptedReply(tool_calls=[("stock", {})]), "Sorry."])
    agent = Agent(
        write(tmp_path, {"chat.yaml": spec}),
        "chat",
        llm=model,
        functions={"shop.stock": stock},
        state_store=store,
        credentials=CredentialsProvider({"shop-token": secret}),
    )
    agent.step_sync("Any?", execution_id="c1")
    agent.step_sync("Any?", execution_id="c2")
    last = "ConnectionError: reset; headers: Authorization: Bearer **********"
    assert model.calls[-1][-1].content == _refusal(last)
    assert secret.encode() not in _written(tmp_path, store)


class Plan(enum.Enum):
    PRO = "plan-pro-7781"


class Badge:
    """An object that prints itself: its own __str__, and no public attribute."""

    def __init__(self, code: str) -> None:
        self._code = code

    def __str__(self) -> str:
        return f"badge-{self._code}"


KINDS: dict[str, Any] = {
    "user_id": uuid.UUID("8c1e4a52-0d3b-4f0e-9d7e-3a2b1c0d9e8f"),
    "balance": decimal.Decimal("4411.22"),
    "born": datetime.date(1987, 3, 14),
    "seen": datetime.datetime(2031, 7, 9, 13, 45, 7),
    "opens": datetime.time(9, 15, 30),
    "plan": Plan.PRO,
    "home": PurePosixPath("/home/zed/private-dir"),
    "ip": ipaddress.IPv4Address("203.0.113.77"),
    "badge": Badge("x91k"),
}
WHOAMI = """
kind: ToolNode
name: whoami
description: Who is calling
func: shop.whoami
"""
SHOWN = [
    "8c1e4a52-0d3b-4f0e-9d7e-3a2b1c0d9e8f",
    "4411.22",
    "1987-03-14",
    "2031-07-09 13:45:07",
    "09:15:30",
    "plan-pro-7781",
    "/home/zed/private-dir",
    "203.0.113.77",
    "badge-x91k",
]


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_context_values_that_print_themselves_are_masked_as_they_print(tmp_path: Path, kind: str):
    def whoami(ctx: NodeContext) -> str:
        c = ctx.context
        return ", ".join(str(c[name]) for name in KINDS) + f"; {c['plan'].value}; {c!r}"

    spec = "kind: LLMNode\nname: chat\ntools: [whoami]\n---\n" + WHOAMI
    store = _store(tmp_path, kind)
    model = ScriptedModel([ScriptedReply(tool_calls=[("whoami", {})]), "Done."])
    agent = Agent(
        write(tmp_path, {"chat.yaml": spec}),
        "chat",
        llm=model,
        functions={"shop.whoami": whoami},
        state_store=store,
    )
    assert agent.step_sync("Who am I?", context=KINDS).output == "Done."
    read = model.calls[-1][-1].content
    assert read.startswith(", ".join(["[context]"] * len(KINDS)) + "; [context]; {")
    written = _written(tmp_path, store)
    for text in [*SHOWN, repr(KINDS["seen"]), repr(KINDS["born"])]:
        assert text not in read
        assert text.encode() not in written


def test_the_texts_of_a_value_that_prints_itself_are_its_str_and_repr():
    texts = texts_of({"born": datetime.date(1987, 3, 14), "plan": Plan.PRO})
    assert "1987-03-14" in texts and "datetime.date(1987, 3, 14)" in texts
    assert {"plan-pro-7781", "Plan.PRO", "<Plan.PRO: 'plan-pro-7781'>"} <= set(texts)


def test_a_value_that_prints_shorter_than_four_characters_is_left_alone():
    # The rule of short strings and numbers: "1.5" is everywhere in text.
    assert texts_of({"rate": decimal.Decimal("1.5")}) == ["Decimal('1.5')"]


class Broken:
    """An object whose __str__ and __repr__ raise: masking reads its attributes all the same."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __str__(self) -> str:
        raise RuntimeError("no str")

    __repr__ = __str__


def test_a_value_whose_str_raises_is_still_masked_by_its_attributes():
    assert texts_of({"user": Broken("tok-8812")}) == ["tok-8812"]


def test_the_contexts_keys_are_not_masked():
    # Keys are names the code chose ("api_key"), not the caller's data.
    assert texts_of({"api_key": "k-93f1c2", "scores": {"alice-liddell": 1}}) == ["k-93f1c2"]


def test_an_empty_context_has_nothing_to_mask():
    assert texts_of({}) == []
    assert texts_of({"nested": {}}) == []
