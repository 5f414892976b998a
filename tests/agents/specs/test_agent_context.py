"""The call's context is never stored: not in any byte of a store, an event, an export or
an error, after steps with tool calls that saw it and a failure that named it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from specs_helpers import CHAT, write

from nodestep import Agent, FilesystemStateStore, ScriptedModel, SQLiteStateStore
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
