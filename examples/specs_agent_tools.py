"""An agent with a tool: typed arguments, a bad call's error sent to the model, node state.

specs_agent/tools/ holds an LLMNode that lists the ToolNode ``get_order``, whose
``func: main.get_order`` names the function below: ``functions=`` maps that string to
it. The tool's arguments are declared (``number: integer``, ``with_items: boolean``,
optional): the scripted model first sends ``number: "ten forty-two"``, which does not fit,
and gets back an error tool message naming the argument instead of a crash; it calls
again with a number, which the agent converts before the function runs.
"""

from pathlib import Path

from nodestep import Agent, ScriptedModel, ScriptedReply

SPECS = Path(__file__).parent / "specs_agent" / "tools"
ORDERS = {1042: {"status": "shipped on Monday", "items": ["tyre", "inner tube"]}}


def get_order(number: int, with_items: bool = False) -> str:
    order = ORDERS.get(number)
    if order is None:
        return f"no order {number}"
    items = f", items: {', '.join(order['items'])}" if with_items else ""
    return f"order {number} ({type(number).__name__}): {order['status']}{items}"


model = ScriptedModel(
    [
        ScriptedReply(tool_calls=[("get_order", {"number": "ten forty-two"})]),
        ScriptedReply(
            tool_calls=[("get_order", {"number": "1042", "with_items": True})], expect="number"
        ),
        ScriptedReply("Your order 1042 (a tyre and an inner tube) shipped on Monday."),
    ]
)
agent = Agent(SPECS, start_node="chat", llm=model, functions={"main.get_order": get_order})

print("The system prompt lists the tool:")
out = agent.step_sync("Where is my order 1042?")
for line in model.calls[0][0].content.splitlines():
    print(f"    {line}".rstrip())
print()
for message in model.calls[-1][1:]:
    calls = [f"{c.name}({c.args})" for c in getattr(message, "tool_calls", ())]
    print(f"{message.role}: {message.content or ', '.join(calls)}")
print(f"-> {out.output} ({out.status})")
print()
state = agent.node_state_sync("get_order")
print(f"get_order's state: {state.status}, has_error={state.has_error}")
print(f"  last input:  {state.input}")
print(f"  last output: {state.output}")
chat = agent.node_state_sync("chat")
print(f"chat's state: {chat.status}, {len(chat.messages)} messages")
