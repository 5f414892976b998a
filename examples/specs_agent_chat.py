"""A simple agent from a specs folder: one LLMNode, a scripted model, one conversation.

specs_agent/chat/chat.yaml is a Liman-format LLMNode whose system prompt is written in
English and Russian. Each step sends one user message; the agent remembers the
conversation without a session id. The language of a step is ``context["lang"]``: Russian
is in the bundle, German is not, so a German step falls back to the English prompt.
"""

from pathlib import Path

from nodestep import Agent, ScriptedModel

SPECS = Path(__file__).parent / "specs_agent" / "chat"

model = ScriptedModel(
    [
        "Hello! How can I help with your bike?",
        "Здравствуйте! Чем могу помочь?",
        "Guten Tag! Wie kann ich helfen?",
    ]
)
agent = Agent(SPECS, start_node="LLMNode/chat", llm=model)

ids = set()
for text, lang in [("Hello!", "en"), ("Привет!", "ru"), ("Hallo!", "de")]:
    out = agent.step_sync(text, context={"lang": lang})
    ids.add(out.execution_id)
    system = model.calls[-1][0].content
    print(f"{lang}: {text!r} -> {out.output!r} ({out.status})")
    print(f"    system prompt: {system.splitlines()[0]}")
    print(f"    the model saw {len(model.calls[-1]) - 1} messages after it")

print("one conversation:", len(ids) == 1)
