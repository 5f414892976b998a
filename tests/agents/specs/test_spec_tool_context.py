"""A @tool with a ToolContext parameter, given to an Agent run from a folder of specs."""

from __future__ import annotations

from pathlib import Path

from specs_helpers import write

from nodestep import ScriptedModel, ScriptedReply, tool
from nodestep.agents import Agent, ToolContext

CHAT = """
kind: LLMNode
name: chat
prompts:
  system:
    en: You answer.
tools:
  - whoami
"""


def test_a_spec_agent_s_tool_sees_its_call_and_thread_but_no_state(tmp_path: Path):
    seen: list[tuple[str, str, object]] = []

    @tool
    def whoami(run: ToolContext) -> str:
        """Tell the call's id."""
        seen.append((run.tool_call_id, run.thread_id, run.state))
        return f"call {run.tool_call_id}"

    model = ScriptedModel([ScriptedReply(tool_calls=[("whoami", {})]), "done"])
    folder = write(tmp_path, {"chat.yaml": CHAT})
    agent = Agent(folder, start_node="LLMNode/chat", llm=model, tools=[whoami])
    out = agent.step_sync("who?")
    assert (out.status, out.output) == ("completed", "done")
    assert seen == [("call-1-1", out.execution_id, None)]
    assert model.calls[1][-1].content == "call call-1-1"
