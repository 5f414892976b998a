"""An agent that loops over a manual, taking notes, until it can answer.

Run it with ``python examples/inverter_agent.py``.

The agent answers questions about a (fictional) home power inverter, the PureSine 900VA,
from its manual: one half holds the specifications, the other the support pages. The
question needs both halves. ``analyze_and_decide`` asks the model what to do next: look
something up in the specifications, look it up in the support pages, or answer. The two
lookup nodes add a note to ``findings`` (a list with the ``add`` reducer, so every note is
kept, misses included) and send the result back to the model, which decides again.

The model here is a ``ScriptedModel`` that replays a run in which the model's first
lookups were written in plain language, which the simple matcher does not understand; each
miss lists the manual's topics, and after that the model uses them. The script is checked
as it goes: each reply's ``expect`` is text the model must have just been sent.

After the run, the script reads the run back from the history, step by step, and then asks
a second question on the same thread, which the notes already answer.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import Field

from nodestep import (
    END,
    START,
    Graph,
    InMemoryStateStore,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    add,
    branch,
    node,
)
from nodestep.agents import SystemMessage, ToolMessage

SPECS = {
    "model": "PureSine 900VA",
    "rated_capacity": "720 Watts",
    "battery_support": "one 12 V 150 Ah tubular battery",
    "eco_mode": "input range 140-280 V, for appliances",
    "ups_mode": "input range 180-260 V, for computers; switches over in 10 ms",
}
SUPPORT = {
    "overload_alarm": (
        "Continuous buzzer sound and red Overload LED. The connected load exceeds 720W. "
        "Disconnect heavy appliances and press the reset switch on the rear panel."
    ),
    "low_water_indicator": "Amber LED: top up the battery with distilled water.",
    "battery_low": "Beep every 10 seconds: the battery is below 10.5 V; reduce the load.",
}


def lookup_specs(query: str) -> str:
    for topic, value in SPECS.items():
        if topic in query.lower():
            return f"Specification ({topic}): {value}"
    return f"No matching specification found. Available topics: {', '.join(SPECS)}."


def lookup_support(query: str) -> str:
    for topic, value in SUPPORT.items():
        if topic in query.lower():
            return f"Troubleshooting ({topic}): {value}"
    return f"No matching troubleshooting entry found. Available topics: {', '.join(SUPPORT)}."


class InverterState(MessagesState):
    user_query: str = ""
    next_action: str = ""
    search_query: str = ""
    findings: Annotated[list[str], add] = Field(default_factory=list)
    final_answer: str = ""


ANSWER = (
    "The overload buzzer means the connected appliances are drawing more than the unit's "
    "rated load. For the PureSine 900VA, the maximum supported load is 720 watts. "
    "Disconnect one or more high-power appliances, then press the reset switch on the rear "
    "panel. The red Overload LED should turn off."
)


def decide(action: str, query: str = "", answer: str = "", expect: str | None = None) -> Any:
    args = {"action": action, "search_query": query, "answer": answer}
    return ScriptedReply(tool_calls=[("decide", args)], expect=expect)


model = ScriptedModel(
    [
        decide("check_specs", "overload buzzer meaning and maximum wattage load for this model"),
        decide("check_specs", "maximum wattage load", expect="Specification (model)"),
        decide("check_specs", "rated_capacity", expect="Available topics: model"),
        decide("check_support", "overload buzzer", expect="720 Watts"),
        decide("check_support", "overload_alarm", expect="Available topics: overload_alarm"),
        decide("respond", answer=ANSWER, expect="press the reset switch"),
        decide(
            "respond", answer="No: it handles 720 W, less than the kettle's 800 W.", expect="800 W"
        ),
    ],
    name="inverter-expert",
)

INSTRUCTIONS = (
    "You answer questions about the PureSine 900VA from its manual. Call decide with "
    "action check_specs or check_support and a search_query, or respond with the answer."
)


@node
async def analyze_and_decide(state: InverterState) -> dict:
    reply = await model.complete([SystemMessage(content=INSTRUCTIONS), *state.messages])
    args = reply.tool_calls[0].args
    update = {"messages": [reply], "next_action": args["action"]}
    if args["action"] == "respond":
        return {**update, "final_answer": args["answer"]}
    return {**update, "search_query": args["search_query"]}


def _note(state: InverterState, note: str) -> dict:
    call = state.messages[-1].tool_calls[0]
    result = ToolMessage(content=note, tool_call_id=call.id, name=call.name)
    return {"findings": [note], "messages": [result]}


@node
def specs_node(state: InverterState) -> dict:
    return _note(state, lookup_specs(state.search_query))


@node
def support_node(state: InverterState) -> dict:
    return _note(state, lookup_support(state.search_query))


def route_decision(state: InverterState) -> str:
    return state.next_action


graph = Graph(InverterState, name="inverter", state_store=InMemoryStateStore()).flow(
    START >> analyze_and_decide,
    analyze_and_decide
    >> branch(
        route_decision,
        {"check_specs": specs_node, "check_support": support_node, "respond": END},
    ),
    specs_node >> analyze_and_decide,
    support_node >> analyze_and_decide,
)

QUESTION = (
    "The overload buzzer went off this morning. What does that mean, and what is the "
    "maximum wattage load this model can actually handle?"
)


def ask(question: str) -> InverterState:
    result = graph.invoke({"user_query": question, "messages": [question]}, thread_id="inverter")
    return result.state


def read_back() -> None:
    print("\n--- The run, read back ---")
    history = asyncio.run(graph.state_history("inverter"))
    for number, entry in enumerate(s for s in history if s.event.type == "superstep_completed"):
        state = entry.snapshot.value
        print(f"--- Step {number} ---")
        print(f"  Ran                 : {entry.nodes}")
        print(f"  Next node scheduled : {entry.snapshot.next or ('(end)',)}")
        print(f"  State ['next_action']: {state.next_action or 'none'}")
        print(f"  State ['search_query']: {state.search_query or 'none'}")
        print(f"  Accumulated notes   : {len(state.findings)}")


def supersteps() -> int:
    history = asyncio.run(graph.state_history("inverter"))
    return sum(1 for entry in history if entry.event.type == "superstep_completed")


def main() -> None:
    state = ask(QUESTION)
    print("--- Final Response ---")
    print(state.final_answer)
    print("\n--- Accumulated Notes in State (findings channel) ---")
    for number, note in enumerate(state.findings, start=1):
        print(f"[{number}] {note}")
    read_back()

    print("\n--- The same thread, again ---")
    before = supersteps()
    state = ask("Can it run an 800 W kettle? It says 800 W on the label.")
    print(state.final_answer)
    print(f"supersteps this time: {supersteps() - before}, notes kept: {len(state.findings)}")


if __name__ == "__main__":
    main()
