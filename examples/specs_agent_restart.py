"""A conversation that survives a restart: the same ``execution_id`` in a new process.

Turn 1 runs in this process on a durable store; a second process (this script again)
builds a new ``Agent`` on the same store and continues with ``execution_id=``: the model
sees the whole conversation, and the LLMNode's state is restored. It runs once on the
file store and once on SQLite. The call context (here the user's id) is never stored.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from nodestep import Agent, FilesystemStateStore, ScriptedModel, SQLiteStateStore

SPECS = Path(__file__).parent / "specs_agent" / "chat"
SCRIPT = ["Hello, Ada! How can I help?", "You told me your name is Ada."]


def store_for(kind: str, directory: str) -> FilesystemStateStore | SQLiteStateStore:
    if kind == "file":
        return FilesystemStateStore(Path(directory) / "agent.jsonl")
    return SQLiteStateStore(Path(directory) / "agent.db")


def second_process(kind: str, directory: str, execution_id: str) -> None:
    model = ScriptedModel(SCRIPT)
    agent = Agent(SPECS, start_node="chat", llm=model, state_store=store_for(kind, directory))
    out = agent.step_sync("What is my name?", execution_id=execution_id)
    print(f"  process 2: {out.output!r} ({out.status})")
    print(f"  process 2: the model saw {[m.role for m in model.calls[-1]]}")
    print(f"  process 2: chat is {agent.node_state_sync('chat').status}")


if len(sys.argv) == 5 and sys.argv[1] == "second":
    second_process(*sys.argv[2:])
    sys.exit()

for kind in ("file", "sqlite"):
    with tempfile.TemporaryDirectory() as directory:
        agent = Agent(
            SPECS,
            start_node="chat",
            llm=ScriptedModel(SCRIPT),
            state_store=store_for(kind, directory),
        )
        out = agent.step_sync("Hi, I'm Ada.", context={"user": {"id": 7, "token": "s3cret"}})
        print(f"{kind} store:")
        print(f"  process 1: {out.output!r} ({out.status})")
        stored = b"".join(p.read_bytes() for p in Path(directory).iterdir())
        print(f"  process 1: in the store: the conversation {b'Ada' in stored}, ", end="")
        print(f"the context's token {b's3cret' in stored}")
        second = subprocess.run(
            [sys.executable, __file__, "second", kind, directory, out.execution_id],
            capture_output=True,
            text=True,
            check=True,
        )
        print(second.stdout, end="")
