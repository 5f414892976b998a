"""The call's context is never stored: not in any byte of a store, an event, an export or
an error, after steps with tool calls that saw it and a failure that named it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from specs_helpers import CHAT, write

from nodestep import (
    Agent,
    FilesystemStateStore,
    GraphConfigError,
    NodeContext,
    ScriptedModel,
    SQLiteStateStore,
    interrupt,
)
from nodestep.agents import ScriptedReply
from nodestep.store import export_thread

USER_ID = "ctx-user-88231"
TOKEN = "ctx-token-5512"
CONTEXT = {"lang": "en", "user": {"id": USER_ID, "tier": "gold"}, "token": TOKEN}

ACCOUNT = """
kind: ServiceAccount
name: caller
context:
  inject:
    - user_id: user.id
"""
LOOKUP = """
kind: ToolNode
name: get_user
description: Look a user up
func: users.lookup
arguments:
  - name: user_id
    type: integer
auth:
  service_account: caller
"""
FAIL = """
kind: ToolNode
name: explode
description: Always fails
func: users.explode
auth:
  service_account: caller
"""


def lookup(user_id: Any) -> str:
    # A tool that echoes what it was injected: its result must not carry it into a store.
    return f"record of {user_id}"


def explode(user_id: str) -> str:
    raise ValueError(f"no access for {user_id}")


def fail_model(user_id: str) -> str:
    raise RuntimeError(f"cannot serve {user_id}")


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_no_byte_of_the_context_reaches_the_store(tmp_path: Path, kind: str):
    chat = CHAT.replace(
        "  - get_user\n", "  - get_user\n  - explode\nnodes: [{target: crash, when: crash}]\n"
    )
    crash = "kind: FunctionNode\nname: crash\nfunc: users.fail\nauth: {service_account: caller}\n"
    files = {
        "chat.yaml": chat,
        "tool.yaml": LOOKUP,
        "fail.yaml": FAIL,
        "sa.yaml": ACCOUNT,
        "crash.yaml": crash,
    }
    store = (
        FilesystemStateStore(tmp_path / "h.jsonl")
        if kind == "file"
        else SQLiteStateStore(tmp_path / "h.db")
    )
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 1}), ("explode", {})]),
        ScriptedReply("answered", expect="no access for [context]"),
        "about to crash",
    ]
    functions = {"users.lookup": lookup, "users.explode": explode, "users.fail": fail_model}
    agent = Agent(
        write(tmp_path, files),
        "chat",
        llm=ScriptedModel(script),
        state_store=store,
        functions=functions,
    )
    first = agent.step_sync("who am I?", context={**CONTEXT, "crash": False})
    assert first.output == "answered"
    failed = agent.step_sync("crash now", context={**CONTEXT, "crash": True})
    assert failed.status == "failed" and failed.failed_nodes == ("crash",)
    assert failed.error == "RuntimeError: cannot serve [context]"
    seen = [repr(first), repr(failed)]
    for name in ("chat", "get_user", "explode", "crash"):
        seen.append(repr(agent.node_state_sync(name)))
    seen.append(repr(agent.graph.history_sync(first.execution_id)))
    exported = anyio.run(export_thread, store, first.execution_id)
    seen.append(json.dumps(exported, default=str))
    anyio.run(store.aclose)
    written = b"".join(
        p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "specs" not in p.parts
    )
    assert b"run_failed" in written  # the failure was stored, masked
    for value in (USER_ID, TOKEN):
        assert value.encode() not in written
        assert value not in "\n".join(seen)
    assert "record of [context]" in "\n".join(seen)


def test_the_agents_graph_run_directly_keeps_the_context_out_of_the_store(tmp_path: Path):
    # As a server or a worker runs it: agent.graph with the step's input, no Agent.step.
    files = {"chat.yaml": CHAT + "  - explode\n", "tool.yaml": LOOKUP, "fail.yaml": FAIL}
    files["sa.yaml"] = ACCOUNT
    store = SQLiteStateStore(tmp_path / "h.db")
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 1}), ("explode", {})]),
        ScriptedReply("answered", expect="no access for [context]"),
    ]
    functions = {"users.lookup": lookup, "users.explode": explode}
    agent = Agent(write(tmp_path, files), "chat", llm=ScriptedModel(script), functions=functions)

    async def run() -> None:
        patch = agent.step_input("who am I?")
        await agent.graph.ainvoke(patch, thread_id="t", context=CONTEXT, state_store=store)
        await store.aclose()

    anyio.run(run)
    written = b"".join(p.read_bytes() for p in tmp_path.glob("h.db*"))
    assert b"record of [context]" in written
    for value in (USER_ID, TOKEN):
        assert value.encode() not in written


def _store(tmp_path: Path, kind: str) -> FilesystemStateStore | SQLiteStateStore:
    if kind == "file":
        return FilesystemStateStore(tmp_path / "h.jsonl")
    return SQLiteStateStore(tmp_path / "h.db")


def _written(tmp_path: Path, store: Any) -> bytes:
    anyio.run(store.aclose)
    return b"".join(
        p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "specs" not in p.parts
    )


ADDRESS_ACCOUNT = "kind: ServiceAccount\nname: caller\ncontext: {inject: [address: user.address]}\n"
PROFILE = """
kind: ToolNode
name: {name}
description: The caller's profile
func: users.{name}
auth: {{service_account: caller}}
"""


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_context_value_is_masked_in_its_json_and_repr_escaped_forms(tmp_path: Path, kind: str):
    # A newline, a quote and a backslash: a dict result stores them JSON-escaped, and an
    # error made with {value!r} repr-escaped, so the plain value is not in the text.
    address = '221B Baker Street\nLondon "NW1" \\ 6XE, Zürich'

    def profile(address: str) -> dict[str, Any]:
        return {"has_address": True, "address": address}

    def refuse(address: str) -> str:
        raise ValueError(f"no delivery to {address!r}")

    chat = CHAT.replace("  - get_user\n", "  - profile\n  - refuse\n")
    files = {"chat.yaml": chat, "sa.yaml": ADDRESS_ACCOUNT}
    files |= {f"{n}.yaml": PROFILE.format(name=n) for n in ("profile", "refuse")}
    store = _store(tmp_path, kind)
    model = ScriptedModel([ScriptedReply(tool_calls=[("profile", {}), ("refuse", {})]), "ok"])
    functions = {"users.profile": profile, "users.refuse": refuse}
    agent = Agent(write(tmp_path, files), "chat", llm=model, state_store=store, functions=functions)
    out = agent.step_sync("Where do I live?", context={"user": {"address": address}})
    assert out.output == "ok"
    read = [m.content for m in model.calls[-1][-2:]]
    assert read == [
        '{"has_address":true,"address":"[context]"}',
        "Error: refuse raised ValueError: no delivery to '[context]'",
    ]
    written = _written(tmp_path, store)
    assert b"[context]" in written
    for piece in ("221B Baker", "NW1", "6XE", "Z\\u00fcrich", "Zürich"):
        assert piece.encode() not in written


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_every_value_of_a_long_context_is_masked(tmp_path: Path, kind: str):
    # Masking once stopped after 2,000 values: the token after a long list was stored.
    files = {"chat.yaml": CHAT, "tool.yaml": LOOKUP, "sa.yaml": ACCOUNT}
    store = _store(tmp_path, kind)
    model = ScriptedModel([ScriptedReply(tool_calls=[("get_user", {"user_id": 1})]), "done"])
    functions = {"users.lookup": lookup}
    agent = Agent(write(tmp_path, files), "chat", llm=model, state_store=store, functions=functions)
    context = {"user": {"id": USER_ID}, "recent_orders": list(range(5000))}
    assert agent.step_sync("who am I?", context=context).output == "done"
    assert model.calls[-1][-1].content == "record of [context]"
    assert USER_ID.encode() not in _written(tmp_path, store)


def test_a_context_too_large_to_mask_is_refused_naming_the_limit(tmp_path: Path):
    agent = Agent(
        write(tmp_path, {"chat.yaml": "kind: LLMNode\nname: chat\n"}),
        "chat",
        llm=ScriptedModel(["never"]),
    )
    with pytest.raises(GraphConfigError, match=r"more than 100,000 values.*Pass only what"):
        agent.step_sync("hi", context={"ids": list(range(100_001))})
    assert agent.execution_id is None  # refused before a conversation started
    assert agent.step_sync("hi", context={"ids": list(range(1000))}).output == "never"


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_an_interrupts_payload_is_stored_with_the_context_masked(tmp_path: Path, kind: str):
    email = "ada@private-mail.example"

    def send(text: str, ctx: NodeContext) -> str:
        to = ctx.context["user"]["email"]
        answer = interrupt({"question": f"Send {text!r} to {to}?", "to": [to]}, id="approve")
        return f"Sent to {to}." if answer == "yes" else "Not sent."

    files = {
        "chat.yaml": "kind: LLMNode\nname: chat\nnodes: [send]\n",
        "send.yaml": "kind: Node\nname: send\nfunc: mail.send\n",
    }
    store = _store(tmp_path, kind)
    model = ScriptedModel(["Your refund is on its way."])
    agent = Agent(
        write(tmp_path, files), "chat", llm=model, state_store=store, functions={"mail.send": send}
    )
    context = {"user": {"email": email}}
    paused = agent.step_sync("Draft the mail", context=context)
    assert paused.status == "paused"
    assert paused.interrupts[0].payload == {
        "question": "Send 'Your refund is on its way.' to [context]?",
        "to": ["[context]"],
    }
    done = agent.step_sync(resume="yes", context=context)
    assert done.output == "Sent to [context]."
    assert email.encode() not in _written(tmp_path, store)


@dataclasses.dataclass
class User:
    token: str


class Account:
    """A plain object: injection reads its attributes, and masking reads them too."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._client = object()  # private: machinery, not data


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_dataclass_and_an_objects_attributes_in_the_context_are_masked(tmp_path: Path, kind: str):
    def whoami(token: str, key: str) -> str:
        return f"token {token}, key {key}"

    account = (
        "kind: ServiceAccount\nname: caller\n"
        "context: {inject: [token: user.token, key: account.key]}\n"
    )
    chat = CHAT.replace("  - get_user\n", "  - whoami\n")
    files = {"chat.yaml": chat, "sa.yaml": account, "who.yaml": PROFILE.format(name="whoami")}
    store = _store(tmp_path, kind)
    model = ScriptedModel([ScriptedReply(tool_calls=[("whoami", {})]), "done"])
    functions = {"users.whoami": whoami}
    agent = Agent(write(tmp_path, files), "chat", llm=model, state_store=store, functions=functions)
    context = {"user": User(token=TOKEN), "account": Account(key=USER_ID)}
    assert agent.step_sync("who am I?", context=context).output == "done"
    assert model.calls[-1][-1].content == "token [context], key [context]"
    written = _written(tmp_path, store)
    for value in (USER_ID, TOKEN):
        assert value.encode() not in written


def test_a_steps_masks_hold_inside_it_and_are_undone_after_even_on_an_error():
    from nodestep.agents._specs import masking

    before = masking._CURRENT.get()
    outer, inner = masking.Masks(["outer secret"]), masking.Masks(["inner secret"])
    with masking.masked(outer):
        assert masking._CURRENT.get() is outer
        with pytest.raises(KeyError), masking.masked(inner):
            assert masking._CURRENT.get() is inner
            raise KeyError("boom")  # goes on out: the masks never swallow an error
        assert masking._CURRENT.get() is outer
    assert masking._CURRENT.get() is before
