"""Replaying an ``Agent``'s stored conversation through a new version of its specs.

``nodestep.testing.replay`` re-runs the thread's steps through ``agent.graph``; with
``recorded=True`` the LLMNodes take the replies they stored and the ToolNodes the results
their calls stored, so a change to the specs (an edge, a prompt, a tool's handling) is
tested against what the model and the tools said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, ByPrompt, write

from nodestep import Agent, InMemoryStateStore, ScriptedModel
from nodestep.agents import ScriptedReply
from nodestep.testing import replay

pytestmark = pytest.mark.anyio

SUMMARIZE = """
kind: LLMNode
name: summarize
prompts:
  system: You summarize records.
"""
GOLD_EDGE = "llm_nodes:\n  - target: summarize\n    when: user.tier == 'gold'\n"


def _script() -> list[Any]:
    return [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 7})]),
        "User 7 is Ann.",
        ScriptedReply(tool_calls=[("get_user", {"user_id": "eight"})]),  # a bad argument
        "I could not look that up.",
    ]


async def _stored(tmp_path: Path) -> tuple[InMemoryStateStore, str]:
    """A two-step conversation: a tool call, then a call the tool's arguments refuse.

    The specs have a second LLMNode that no edge reaches yet: a new version may add an edge
    to it (a new node would be a new field of the state, which a replay reports at once).
    """
    store = InMemoryStateStore()
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "sum.yaml": SUMMARIZE}  # sum: unused
    specs = write(tmp_path / "v1", files)
    model = ScriptedModel(_script())
    agent = Agent(specs, "chat", llm=model, functions=FUNCTIONS, state_store=store)
    first = await agent.step("Who is 7?", context={"lang": "ru"})
    second = await agent.step("And eight?")
    assert (first.output, second.output) == ("User 7 is Ann.", "I could not look that up.")
    return store, first.execution_id


async def test_a_conversation_replays_clean_through_the_same_specs(tmp_path: Path) -> None:
    store, thread = await _stored(tmp_path)
    specs = write(tmp_path / "v2", {"chat.yaml": CHAT, "tool.yaml": GET_USER, "s.yaml": SUMMARIZE})
    again = Agent(specs, "chat", llm=ScriptedModel(_script()), functions=FUNCTIONS)
    report = await replay(again.graph, store, thread)
    assert report.clean, report
    assert report.calls == 2


async def test_recorded_replay_takes_the_stored_replies_and_tool_results(tmp_path: Path) -> None:
    store, thread = await _stored(tmp_path)
    called: list[int] = []

    def get_user(user_id: int) -> str:
        called.append(user_id)
        raise AssertionError("a recorded replay must not call the tool")

    specs = write(tmp_path / "v2", {"chat.yaml": CHAT, "tool.yaml": GET_USER, "s.yaml": SUMMARIZE})
    silent = Agent(specs, "chat", llm=ScriptedModel([]), functions={"users.get_user": get_user})
    report = await replay(silent.graph, store, thread, recorded=True)
    assert report.clean, report
    assert "with the recorded model and tool outputs" in str(report)
    assert called == []
    live = await replay(silent.graph, store, thread)  # the same version with its model
    assert not live.clean and "the new version a run_failed" in str(live)


async def test_recorded_replay_catches_a_new_edge_where_the_result_goes_elsewhere(
    tmp_path: Path,
) -> None:
    store, thread = await _stored(tmp_path)
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER + GOLD_EDGE, "sum.yaml": SUMMARIZE}
    specs = write(tmp_path / "v2", files)
    summary = ScriptedModel(["Gold user 7."])
    model = ByPrompt({"You answer": ScriptedModel([]), "You summarize": summary})
    changed = Agent(specs, "chat", llm=model, functions=FUNCTIONS)
    # without the context the edge reads, the tool's result goes back to chat, as stored
    assert (await replay(changed.graph, store, thread, recorded=True)).clean
    gold = {"user": {"tier": "gold"}}
    report = await replay(changed.graph, store, thread, recorded=True, context=gold)
    assert not report.clean
    assert report.divergence is not None and report.divergence.node == "get_user"
    assert report.divergence.event_type == "superstep_completed"
