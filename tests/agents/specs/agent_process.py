"""One step of an agent in a process of its own.

``python agent_process.py STORE_URL FOLDER EXECUTION_ID TEXT``

Prints the step's output, then the LLMNode's conversation as JSON lines, so a test can
run two processes on one store and see the second continue the first's conversation.
"""

from __future__ import annotations

import json
import sys

from specs_helpers import FUNCTIONS

from nodestep import Agent, ScriptedModel
from nodestep.agents import ScriptedReply


def main() -> None:
    url, folder, execution_id, text = sys.argv[1:5]
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 1})]),
        "first answer",
        ScriptedReply("second answer", expect="again"),
    ]
    agent = Agent(
        folder, "LLMNode/chat", llm=ScriptedModel(script), state_store=url, functions=FUNCTIONS
    )
    out = agent.step_sync(text, execution_id=execution_id, context={"lang": "en"})
    print(out.status, out.output)
    for message in agent.node_state_sync("chat").messages:
        print(json.dumps({"role": message.role, "content": message.content}))
    print(json.dumps(agent.node_state_sync("get_user").output))


if __name__ == "__main__":
    main()
