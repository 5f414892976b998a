"""The records a step leaves and the routes it takes: a node that fails after a tool round
is recorded failed, a ToolNode's edges go in the order written, a routed tool failure
keeps its call, a FunctionNode reached by several results gets one text, and a tool
listed twice is a load problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from specs_helpers import write

from nodestep import Agent, GraphConfigError, ScriptedModel
from nodestep.agents import AssistantMessage, ScriptedReply, ToolCall

STOCK = """
kind: ToolNode
name: stock
description: Items in stock
func: shop.stock
arguments:
  - name: item
    type: string
"""


class FailsAfterTools:
    """Calls ``stock`` for each item, then fails once when it reads the results."""

    name = "fails-after-tools"

    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.failed = False

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        if messages[-1].role == "user":
            calls = tuple(
                ToolCall(name="stock", args={"item": item}, id=f"c{i}")
                for i, item in enumerate(self.items)
            )
            return AssistantMessage(content="", tool_calls=calls)
        if not self.failed:
            self.failed = True
            raise ConnectionError("the provider is down")
        return AssistantMessage(content="12 fuses.")

    def stream(self, messages: Any, tools: Any = ()) -> Any:
        raise NotImplementedError


@pytest.mark.parametrize("items", [["fuses"], ["fuses", "bulbs"]])
def test_an_llm_node_that_fails_reading_tool_results_is_recorded_failed(
    tmp_path: Path, items: list[str]
):
    chat = "kind: LLMNode\nname: chat\ntools: [stock]\n"
    agent = Agent(
        write(tmp_path, {"chat.yaml": chat, "stock.yaml": STOCK}),
        "chat",
        llm=FailsAfterTools(items),
        functions={"shop.stock": lambda item: f"12 {item}"},
    )
    failed = agent.step_sync("Stock?")
    assert (failed.status, failed.failed_nodes) == ("failed", ("chat",))
    assert failed.error == "ConnectionError: the provider is down"
    state = agent.node_state_sync("chat")
    assert (state.status, state.has_error, state.error) == ("failed", True, failed.error)
    stock = agent.node_state_sync("stock")
    assert (stock.status, stock.has_error) == ("completed", False)
    again = agent.step_sync("And now?")
    assert (again.status, again.output) == ("completed", "12 fuses.")
    state = agent.node_state_sync("chat")
    assert (state.status, state.has_error, state.error) == ("completed", False, None)


def test_a_successful_tool_round_leaves_every_record_completed(tmp_path: Path):
    chat = "kind: LLMNode\nname: chat\ntools: [stock]\n"
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("stock", {"item": "a"}), ("stock", {"item": "b"})]), "done"]
    )
    agent = Agent(
        write(tmp_path, {"chat.yaml": chat, "stock.yaml": STOCK}),
        "chat",
        llm=model,
        functions={"shop.stock": lambda item: f"12 {item}"},
    )
    assert agent.step_sync("Stock?").output == "done"
    for name in ("chat", "stock"):
        assert agent.node_state_sync(name).status == "completed"


def _edges(first: str) -> dict[str, str]:
    llm_edge = "llm_nodes:\n  - target: expert\n"
    node_edge = "nodes:\n  - target: log\n"
    edges = llm_edge + node_edge if first == "llm_nodes" else node_edge + llm_edge
    chat = "kind: LLMNode\nname: chat\nprompts: {system: CHAT}\ntools: [quote]\n"
    quote = "kind: ToolNode\nname: quote\ndescription: price\nfunc: shop.quote\n" + edges
    expert = "kind: LLMNode\nname: expert\nprompts: {system: EXPERT}\n"
    log = "kind: Node\nname: log\nfunc: shop.log\n"
    return {"chat.yaml": chat, "quote.yaml": quote, "expert.yaml": expert, "log.yaml": log}


class ByRole:
    """Answers the expert by its system prompt; the chat calls ``quote`` once."""

    name = "by-role"

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        if messages[0].content == "EXPERT":
            return AssistantMessage(content=f"expert read {messages[-1].content}")
        if messages[-1].role == "user":
            call = ToolCall(name="quote", args={}, id="q1")
            return AssistantMessage(content="", tool_calls=(call,))
        return AssistantMessage(content="chat answer")

    def stream(self, messages: Any, tools: Any = ()) -> Any:
        raise NotImplementedError


@pytest.mark.parametrize(
    ("first", "output"),
    [("llm_nodes", "expert read 40 EUR"), ("nodes", "logged 40 EUR")],
)
def test_a_tool_nodes_edges_are_taken_in_the_order_written(tmp_path: Path, first: str, output: str):
    functions = {"shop.quote": lambda: "40 EUR", "shop.log": lambda text: f"logged {text}"}
    agent = Agent(write(tmp_path, _edges(first)), "chat", llm=ByRole(), functions=functions)
    assert agent.step_sync("price?").output == output


def test_a_tool_listed_twice_is_a_problem_at_the_repeat(tmp_path: Path):
    chat = "kind: LLMNode\nname: chat\ntools:\n  - stock\n  - stock\n"
    with pytest.raises(GraphConfigError) as caught:
        Agent(
            write(tmp_path, {"chat.yaml": chat, "stock.yaml": STOCK}),
            "chat",
            llm=ScriptedModel(["hi"]),
            functions={"shop.stock": lambda item: item},
        )
    (problem,) = caught.value.problems
    assert problem.startswith(f"{tmp_path / 'specs' / 'chat.yaml'}:5:5: ")
    assert "LLMNode 'chat' lists tool 'stock' twice (the first at " in problem
    assert "chat.yaml:4:5); list it once" in problem


def test_a_routed_tool_failure_keeps_the_calls_input_and_error_text(tmp_path: Path):
    def stock(item: str) -> str:
        raise LookupError(f"no {item}")

    routed = STOCK + "nodes:\n  - target: fix\n    when: $is_error()\n"
    files = {
        "chat.yaml": "kind: LLMNode\nname: chat\ntools: [stock]\n",
        "stock.yaml": routed,
        "fix.yaml": "kind: Node\nname: fix\nfunc: shop.fix\n",
    }
    model = ScriptedModel([ScriptedReply(tool_calls=[("stock", {"item": "fuses"})]), "ok"])
    functions = {"shop.stock": stock, "shop.fix": lambda text: f"FIX {text}"}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions=functions)
    step = agent.step_sync("Stock?")
    assert step.output == "FIX stock failed: LookupError: no fuses"
    state = agent.node_state_sync("stock")
    assert (state.status, state.has_error) == ("failed", True)
    assert state.error == "LookupError: no fuses"
    assert state.input == {"name": "stock", "args": {"item": "fuses"}}
    assert state.output == "Error: stock raised LookupError: no fuses"


def test_two_routed_failures_of_one_tool_each_reach_the_target_in_call_order(tmp_path: Path):
    def stock(item: str) -> str:
        raise LookupError(f"no {item}")

    routed = STOCK + "nodes:\n  - target: fix\n    when: $is_error()\n"
    files = {
        "chat.yaml": "kind: LLMNode\nname: chat\ntools: [stock]\n",
        "stock.yaml": routed,
        "fix.yaml": "kind: Node\nname: fix\nfunc: shop.fix\n",
    }
    calls = [("stock", {"item": "fuses"}), ("stock", {"item": "bulbs"})]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), "ok"])
    functions = {"shop.stock": stock, "shop.fix": lambda text: f"FIX [{text}]"}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions=functions)
    step = agent.step_sync("Stock?")
    assert step.output == (
        "FIX [stock failed: LookupError: no fuses\n\nstock failed: LookupError: no bulbs]"
    )


def test_a_function_node_reached_by_several_results_gets_them_joined_in_call_order(
    tmp_path: Path,
):
    files = {
        "chat.yaml": "kind: LLMNode\nname: chat\ntools: [quote]\n",
        "quote.yaml": STOCK.replace("stock", "quote") + "nodes: [sign]\n",
        "sign.yaml": "kind: Node\nname: sign\nfunc: shop.sign\n",
    }
    calls = [("quote", {"item": "brakes"}), ("quote", {"item": "chain"})]
    model = ScriptedModel([ScriptedReply(tool_calls=calls)])

    def sign(text: str) -> str:
        return f"{text} ({type(text).__name__})"

    functions = {"shop.quote": lambda item: f"{item}: 40 EUR", "shop.sign": sign}
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions=functions)
    step = agent.step_sync("prices?")
    assert (step.status, step.output) == ("completed", "brakes: 40 EUR\n\nchain: 40 EUR (str)")
    state = agent.node_state_sync("sign")
    assert (state.input, state.output) == ("brakes: 40 EUR\n\nchain: 40 EUR", step.output)


class CallsAnUnknownTool(FailsAfterTools):
    """Calls a tool that is not there, then fails once when it reads the error."""

    async def complete(self, messages: Any, tools: Any = ()) -> AssistantMessage:
        if messages[-1].role == "user":
            call = ToolCall(name="nope", args={}, id="c0")
            return AssistantMessage(content="", tool_calls=(call,))
        return await super().complete(messages, tools)


def test_an_llm_node_that_fails_reading_an_unknown_tools_error_is_recorded_failed(
    tmp_path: Path,
):
    chat = "kind: LLMNode\nname: chat\ntools: [stock]\n"
    agent = Agent(
        write(tmp_path, {"chat.yaml": chat, "stock.yaml": STOCK}),
        "chat",
        llm=CallsAnUnknownTool([]),
        functions={"shop.stock": lambda item: item},
    )
    failed = agent.step_sync("Stock?")
    assert (failed.status, failed.failed_nodes) == ("failed", ("chat",))
    state = agent.node_state_sync("chat")
    assert (state.status, state.has_error, state.error) == ("failed", True, failed.error)
