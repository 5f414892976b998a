"""Conversations and node records survive a restart: a new Agent on the same store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, write

from nodestep import Agent, FilesystemStateStore, GraphConfigError, ScriptedModel, SQLiteStateStore
from nodestep.agents import ScriptedReply

HERE = Path(__file__).parent
SCRIPT = [
    ScriptedReply(tool_calls=[("get_user", {"user_id": 1})]),
    "first answer",
    ScriptedReply("second answer", expect="again"),
]


def _stores(tmp_path: Path) -> dict[str, Any]:
    return {
        "file": lambda: FilesystemStateStore(tmp_path / "agent.jsonl"),
        "sqlite": lambda: SQLiteStateStore(tmp_path / "agent.db"),
        "file-url": lambda: f"file://{tmp_path / 'url.jsonl'}",
        "sqlite-url": lambda: f"sqlite:///{tmp_path / 'url.db'}",
    }


@pytest.mark.parametrize("kind", ["file", "sqlite", "file-url", "sqlite-url"])
def test_a_new_agent_on_the_same_store_continues_by_execution_id(tmp_path: Path, kind: str):
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    make = _stores(tmp_path)[kind]
    first = Agent(specs, "chat", llm=ScriptedModel(SCRIPT), state_store=make(), functions=FUNCTIONS)
    out = first.step_sync("who is 1?")
    assert out.output == "first answer"
    again = Agent(specs, "chat", llm=ScriptedModel(SCRIPT), state_store=make(), functions=FUNCTIONS)
    before = again.node_state_sync("chat", execution_id=out.execution_id)
    assert [m.content for m in before.messages][-1] == "first answer"
    tool = again.node_state_sync("get_user", execution_id=out.execution_id)
    assert (tool.status, tool.output, tool.input["args"]) == (
        "completed",
        "user 1 (int)",
        {"user_id": 1},
    )
    later = again.step_sync("and again?", execution_id=out.execution_id)
    assert (later.output, later.execution_id) == ("second answer", out.execution_id)
    assert len(again.node_state_sync("chat").messages) == 6
    for agent in (first, again):
        if kind.endswith("url"):
            agent.aclose_sync()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_second_process_continues_the_conversation_of_the_first(tmp_path: Path, kind: str):
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    url = f"file://{tmp_path / 'a.jsonl'}" if kind == "file" else f"sqlite:///{tmp_path / 'a.db'}"

    def run(text: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, str(HERE / "agent_process.py"), url, str(specs), "conv-1", text],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=HERE,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    first = run("who is 1?")
    assert first[0] == "completed first answer"
    second = run("and again?")
    assert second[0] == "completed second answer"
    roles = [json.loads(line)["role"] for line in second[1:-1]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert json.loads(second[-1]) == "user 1 (int)"


def test_an_agent_refuses_the_conversation_of_an_agent_with_other_nodes(tmp_path: Path):
    store = SQLiteStateStore(tmp_path / "shared.db")
    support_specs = write(tmp_path / "support", {"chat.yaml": "kind: LLMNode\nname: chat\n"})
    sales_specs = write(tmp_path / "sales", {"pitch.yaml": "kind: LLMNode\nname: pitch\n"})
    support = Agent(support_specs, "chat", llm=ScriptedModel(["hi", "again"]), state_store=store)
    sales = Agent(sales_specs, "pitch", llm=ScriptedModel(["buy"]), state_store=store, name="sales")
    assert support.step_sync("hello", execution_id="user-1").output == "hi"

    expected = (
        "Conversation 'user-1' was stored by an agent with other nodes: it holds "
        "'conversation_chat' (the conversation of an LLMNode 'chat'), which agent 'sales' "
        "(nodes pitch) does not have. A store keys conversations by execution_id alone, so "
        "two agents on one store need execution ids of their own, such as "
        "'sales-user-1', or a store each."
    )
    calls = {
        "step": lambda: sales.step_sync("hello", execution_id="user-1"),
        "stream": lambda: list(sales.stream_sync("hello", execution_id="user-1")),
        "node_state": lambda: sales.node_state_sync("pitch", execution_id="user-1"),
    }
    for call in calls.values():
        with pytest.raises(GraphConfigError) as refused:
            call()
        assert str(refused.value).startswith(expected)
    # Refused before it ran: the conversation is as support left it, and goes on.
    assert support.step_sync("more", execution_id="user-1").output == "again"
    assert sales.step_sync("hello", execution_id="sales-user-1").output == "buy"
