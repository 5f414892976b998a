"""nodestep graphs and agents as MCP tools, driven by the official mcp SDK's client.

The served graphs (``mcp_graph_script.py``) run as real processes, over stdio and over
streamable HTTP; a few checks of ``mcp_server``'s options talk to it in-process through
the SDK's client.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_process import GRAPH_SCRIPT, graph_command, http_server

from nodestep import (
    END,
    START,
    Agent,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    ScriptedModel,
    ScriptedReply,
    node,
)
from nodestep.agents import MCPClient, mcp_server, serve_mcp

pytestmark = pytest.mark.anyio
SIMPLE_AGENT = (
    Path(__file__).resolve().parent.parent / "data/liman/getting_started/simple_agent/specs"
)


def _stdio(which: str) -> StdioServerParameters:
    command = graph_command(which)
    return StdioServerParameters(command=command[0], args=command[1:])


@pytest.fixture(scope="module")
def pricing_url() -> Iterator[str]:
    with http_server(GRAPH_SCRIPT, "pricing") as url:
        yield url


@pytest.mark.slow
async def test_a_graph_served_over_stdio_takes_its_state_as_arguments_and_answers_it():
    async with Client(_stdio("pricing")) as client:
        (listed,) = (await client.list_tools()).tools
        assert listed.name == "pricing"
        assert (
            listed.description
            == "Price an order; a refund above 100 waits for a manager's approval."
        )
        properties = listed.input_schema["properties"]
        assert set(properties) == {"items", "refund", "total", "approved", "thread_id", "resume"}
        result = await client.call_tool("pricing", {"items": ["tea", "cake"]})
    assert not result.is_error
    answer = result.structured_content
    assert answer is not None and answer["status"] == "completed"
    assert answer["state"] == {"items": ["tea", "cake"], "refund": 0, "total": 6, "approved": True}
    assert result.content[0].text == '{"items":["tea","cake"],"refund":0,"total":6,"approved":true}'


@pytest.mark.slow
async def test_an_interrupt_is_reported_as_such_and_resumed_by_thread_id(pricing_url: str):
    async with Client(pricing_url) as client:
        paused = await client.call_tool("pricing", {"items": ["tv"], "refund": 500})
        assert not paused.is_error
        asked = paused.structured_content
        assert asked is not None and asked["status"] == "interrupted"
        assert asked["interrupts"] == [
            {
                "key": "approve:manager",
                "node": "approve",
                "id": "manager",
                "payload": {"question": "refund 500?"},
            }
        ]
        text = paused.content[0].text
        assert 'asks: approve: {"question":"refund 500?"}' in text
        assert "Call again with this thread_id and resume=<your answer>" in text
        done = await client.call_tool("pricing", {"thread_id": asked["thread_id"], "resume": "no"})
    answer = done.structured_content
    assert answer is not None and answer["thread_id"] == asked["thread_id"]
    assert answer["status"] == "completed" and answer["state"]["approved"] is False


@pytest.mark.slow
async def test_bad_input_is_an_error_result_naming_the_graph_and_field():
    async with Client(_stdio("pricing")) as client:
        result = await client.call_tool("pricing", {"items": "not a list"})
        orphan = await client.call_tool("pricing", {"resume": "yes"})
    assert result.is_error
    assert result.content[0].text.startswith(
        "The run of graph 'pricing' failed: StateUpdateError: Field 'items' got an invalid value"
    )
    assert orphan.is_error and "pass its thread_id too" in orphan.content[0].text


@pytest.mark.slow
async def test_an_agent_served_over_stdio_takes_a_message_and_answers_its_reply():
    async with Client(_stdio("chat")) as client:
        (listed,) = (await client.list_tools()).tools
        assert listed.input_schema["required"] == ["message"]
        first = await client.call_tool("helper", {"message": "Weather in Oslo?"})
        second = await client.call_tool("helper", {"message": "And again?"})
    assert first.content[0].text == "It is sunny in Oslo."
    assert first.structured_content is not None and second.structured_content is not None
    # a thread per call: each call starts a conversation of its own
    assert first.structured_content["thread_id"] != second.structured_content["thread_id"]


@pytest.mark.slow
async def test_nodestep_calls_a_nodestep_graph_served_over_mcp(pricing_url: str):
    async with MCPClient(url=pricing_url) as client:
        (pricing,) = await client.tools()
        answer = await pricing.ainvoke({"items": ["a", "b", "c"]})
    assert answer["state"]["total"] == 9


class Counter(BaseState):
    count: int = 0


@node
def bump(state: Counter) -> dict:
    return {"count": state.count + 1}


def _counter() -> Graph[Counter]:
    return Graph(Counter, name="counter").flow(START >> bump, bump >> END)


async def test_a_thread_id_argument_goes_on_with_the_thread_in_the_given_store():
    store = InMemoryStateStore()
    server = mcp_server(_counter(), threads="argument", state_store=store, tool_name="bump")
    async with Client(server) as client:
        first = await client.call_tool("bump", {"count": 5})
        assert first.structured_content is not None
        tid = first.structured_content["thread_id"]
        again = await client.call_tool("bump", {"thread_id": tid})
        missing = await client.call_tool("nope", {})
    assert again.structured_content is not None
    assert again.structured_content["state"] == {"count": 7}
    assert tid in [t.thread_id for t in (await store.list_threads()).threads]
    assert (
        missing.is_error
        and "There is no tool 'nope'; the tool is 'bump'" in missing.content[0].text
    )


async def test_a_given_input_schema_and_description_are_what_the_caller_sees():
    schema = {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}}}
    server = mcp_server(_counter(), name="tally", input_schema=schema, description="Count up.")
    async with Client(server) as client:
        (listed,) = (await client.list_tools()).tools
        result = await client.call_tool("counter", {"count": 1})
    assert server.name == "tally"
    assert listed.input_schema == schema and listed.description == "Count up."
    assert result.structured_content is not None and result.structured_content["state"] == {
        "count": 2
    }


async def test_an_agent_of_a_specs_folder_is_stepped_and_goes_on_by_thread_id():
    model = ScriptedModel(
        [
            ScriptedReply("Hello! I'm here.", expect="how are you?"),
            ScriptedReply("2 + 2 is 4.", expect="What's 2+2?"),
        ]
    )
    agent = Agent(SIMPLE_AGENT, start_node="LLMNode/chat", llm=model, name="helper")
    server = mcp_server(agent, threads="argument")
    async with Client(server) as client:
        (listed,) = (await client.list_tools()).tools
        first = await client.call_tool("helper", {"message": "Hello, how are you?"})
        assert first.structured_content is not None
        tid = first.structured_content["thread_id"]
        second = await client.call_tool("helper", {"message": "What's 2+2?", "thread_id": tid})
    assert set(listed.input_schema["properties"]) == {"message", "thread_id", "resume"}
    assert listed.description == "Ask agent 'helper': send it a message, get its reply."
    assert first.content[0].text == "Hello! I'm here."
    assert second.content[0].text == "2 + 2 is 4."
    assert second.structured_content == {
        "thread_id": tid,
        "status": "completed",
        "reply": "2 + 2 is 4.",
    }
    with pytest.raises(GraphConfigError, match="pass state_store= to Agent"):
        mcp_server(agent, state_store=InMemoryStateStore())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threads": "shared"}, "threads='shared'; pass 'per_call'"),
        ({"tool_name": ""}, "tool_name=''"),
        ({"input_schema": {"type": "array"}}, "a JSON Schema of an object"),
    ],
)
def test_bad_server_settings_are_refused_naming_the_value(options: dict[str, Any], message: str):
    with pytest.raises(GraphConfigError, match=message):
        mcp_server(_counter(), **options)


def test_only_a_graph_or_an_agent_is_served():
    with pytest.raises(GraphConfigError, match="serves a Graph or an Agent, got function"):
        mcp_server(bump.fn)  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match="transport='sse'; pass 'stdio' or 'http'"):
        serve_mcp(_counter(), transport="sse")  # type: ignore[arg-type]


def test_without_the_mcp_package_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "mcp_types", None)
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[mcp\]'"):
        mcp_server(_counter())
