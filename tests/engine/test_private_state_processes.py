"""A multi-turn conversation over two processes: the second remembers the first turn."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import sys

    from pydantic import BaseModel

    from nodestep import END, START, BaseState, FilesystemStateStore, Graph, node


    class Chat(BaseState):
        message: str = ""
        reply: str = ""


    class Memory(BaseModel):
        name: str = ""


    @node(private_state=Memory)
    def chat(state: Chat, *, memory: Memory) -> dict:
        if state.message.startswith("My name is "):
            memory.name = state.message.removeprefix("My name is ").rstrip(".")
            return {"reply": "Noted."}
        return {"reply": f"Your name is {memory.name or 'unknown'}."}


    path, message = sys.argv[1], sys.argv[2]
    graph = Graph(Chat, state_store=FilesystemStateStore(path)).flow(START >> chat, chat >> END)
    print(graph.invoke({"message": message}, thread_id="session-1").state.reply)
    """
)


def run(script: Path, history: Path, message: str, src: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(script), str(history), message],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(src)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_second_process_node_remembers_what_the_first_turn_stored(tmp_path: Path) -> None:
    script = tmp_path / "chat.py"
    script.write_text(SCRIPT)
    history = tmp_path / "chat.jsonl"
    src = Path(__file__).resolve().parents[2] / "src"
    assert run(script, history, "My name is Alice.", src) == "Noted."
    assert run(script, history, "What is my name?", src) == "Your name is Alice."
    # Stored with the thread's history, as the node's private state, not in the state.
    assert '"private":{"name":"Alice"}' in history.read_text().replace(" ", "")
