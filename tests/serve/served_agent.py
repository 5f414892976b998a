"""``nodestep serve`` of a specs-folder Agent with one tool, as a real process.

Its model calls ``get_user`` for user 7, then says "User 7 is Ada." (each thread anew).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from serve_process import free_port, wait_for_ok

SPECS = """
kind: LLMNode
name: chat
tools: [get_user]
---
kind: ToolNode
name: get_user
description: Find a user by id
func: users.get_user
arguments: [{name: user_id, type: integer}]
"""

AGENT_MODULE = """
from pathlib import Path

from nodestep import Agent, ScriptedModel, ScriptedReply

SPECS = Path(__file__).with_name("specs")
model = ScriptedModel(
    [ScriptedReply(tool_calls=[("get_user", {"user_id": "7"})]), "User 7 is Ada."]
)
agent = Agent(
    SPECS, start_node="chat", llm=model, functions={"users.get_user": lambda user_id: "Ada"}
)
"""


@contextmanager
def serving_agent(folder: Path) -> Iterator[str]:
    """Serve the agent as ``helper`` from ``folder`` (its specs, module and store); yield
    the server's URL."""
    (folder / "specs").mkdir()
    (folder / "specs" / "chat.yaml").write_text(SPECS)
    (folder / "chat_agent.py").write_text(AGENT_MODULE)
    port = free_port()
    command = [str(Path(sys.executable).with_name("nodestep")), "serve", "helper=chat_agent:agent"]
    command += ["--port", str(port), "--store", f"sqlite://{folder}/serve.db"]
    environ = {**os.environ, "PYTHONPATH": str(folder)}
    environ.pop("NODESTEP_STORE", None)
    process = wait_for_ok(subprocess.Popen(command, cwd=folder, env=environ), port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
