"""The tool budget and the todo list live in the thread: a resume in a new process keeps them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = '''
import json, sys
from nodestep import Resume
from nodestep.agents import ScriptedModel, ScriptedReply, ToolMessage, create_react_agent, tool
from nodestep.middleware import HumanApproval, TodoList, ToolCallLimit
from nodestep.store import SQLiteStateStore

@tool
def look(q: str) -> str:
    """Look it up."""
    return "found " + q

script = [
    ScriptedReply(tool_calls=[("write_todos", {"todos": [{"content": "look up"}]}),
                              ("look", {"q": "a"})]),
    ScriptedReply(tool_calls=[("look", {"q": "b"}), ("look", {"q": "c"})]),
    ScriptedReply(tool_calls=[("read_todos", {})]),
    "done",
]
middleware = [HumanApproval(["look"]), ToolCallLimit(thread_limit=2, tool="look"), TodoList()]
agent = create_react_agent(
    ScriptedModel(script), [look], middleware=middleware,
    state_store=SQLiteStateStore(sys.argv[1]),
)
if sys.argv[2] == "start":
    result = agent.invoke({"messages": ["plan and look"]}, thread_id="t")
else:
    result = agent.invoke(None, thread_id="t", resume=Resume("approve"))
    while result.status == "interrupted":  # the next round's look calls wait too
        result = agent.invoke(None, thread_id="t", resume=Resume({
            c["id"]: "approve" for c in result.interrupt.payload["tool_calls"]}))
print(json.dumps({
    "status": result.status,
    "tools": [[m.name, m.content, m.status] for m in result.state.messages
              if isinstance(m, ToolMessage)],
}))
'''


def _run(tmp_path: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "threads.db"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_resume_in_a_new_process_keeps_the_tool_budget_and_the_todo_list(
    tmp_path: Path,
) -> None:
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    first = _run(tmp_path, "start")
    assert first == {"status": "interrupted", "tools": []}
    second = _run(tmp_path, "resume")
    assert second["status"] == "completed"
    tools = second["tools"]
    assert tools[:3] == [
        ["write_todos", "The todo list has 1 items, 0 completed.", "ok"],
        ["look", "found a", "ok"],
        ["look", "found b", "ok"],
    ]
    # The third look is over the thread's budget of 2, counted from the stored calls.
    assert tools[3][0] == "look" and tools[3][2] == "error"
    assert "at most 2 calls of look per thread" in tools[3][1]
    # The list written in the first process is read back in the second.
    assert tools[4] == ["read_todos", '[{"content":"look up","status":"pending"}]', "ok"]
