"""Spec folders written as Liman writes them load and run unchanged, with a scripted model.

The first tests hold folders in Liman's format (no version line, ``func:`` as a dotted
path, descriptions as plain text or bundles, ``type: number``, triggers, OpenAPI tools
listed before they exist). The last one reads the YAML data of Liman's own tests, copied
into tests/data/liman/core_tests/. Liman's sample and guide folders, copied there too,
are run by tests/agents/test_liman_folders.py.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from specs_helpers import write

from nodestep import Agent, GraphConfigError, ScriptedModel
from nodestep.agents import ScriptedReply, openapi_tools

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/agents: the real HTTP server
from api_server import api_server

CORE_TESTS = Path(__file__).resolve().parents[2] / "data" / "liman" / "core_tests"


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


USERS_API = {
    "openapi": "3.0.0",
    "paths": {
        "/users": {"get": {"operationId": "list_users", "summary": "List all users"}},
        "/users/{user_id}": {
            "get": {"operationId": "get_user", "summary": "Get a user by id", "parameters": [
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}}]},
            "delete": {"operationId": "delete_user", "summary": "Delete a user", "parameters": [
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}}]},
            "put": {"operationId": "update_user", "summary": "Update a user", "parameters": [
                {"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}}},
        },
        "/users/search/name/{name}": {"get": {"operationId": "search_user",
            "summary": "Find by name", "parameters": [_path_param("name")]}},
        "/users/search/region/{region}": {"get": {"operationId": "search_by_region",
            "summary": "Find ids by region", "parameters": [
                {"name": "region", "in": "path", "required": True, "schema": {"type": "string"}}]}},
    },
}  # fmt: skip
"""A users API with the operations Liman's OpenAPI sample lists, written here."""

SAMPLE = {
    "specs/chat_llm.yaml": """
        kind: LLMNode
        name: chat
        prompts:
          system:
            en: |
              You help with users.
        tools:
          - confirm_action
          - OpenAPI__delete_user
          - OpenAPI__search_user
          - OpenAPI__get_user
          - OpenAPI__update_user
          - OpenAPI__search_by_region
          - OpenAPI__list_users
        """,
    "specs/confirm_action_tool.yaml": """
        kind: ToolNode
        name: confirm_action
        description: |
          Ask before anything destructive.
        func: main.confirm_destructive_action
        arguments:
          - name: user_id
            type: number
            description: id of the user
          - name: action
            type: string
            description: what to confirm
          - name: title
            type: string
            description: the dialog's title
        triggers:
          - please delete the user
        """,
}


def confirm_destructive_action(title: str, action: str, user_id: str) -> str:
    return f"{action} confirmed for {user_id}"


def _sample_agent(folder: Path, url: str, script: list[Any]) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    tools = openapi_tools(USERS_API, base_url=url)
    functions = {"main.confirm_destructive_action": confirm_destructive_action}
    agent = Agent(folder, start_node="LLMNode/chat", llm=model, tools=tools, functions=functions)
    return agent, model


def _run_sample(folder: Path) -> tuple[Agent, ScriptedModel, Any]:
    script = [
        ScriptedReply(tool_calls=[("OpenAPI__search_user", {"name": "Alice"})]),
        ScriptedReply(tool_calls=[("confirm_action", {
            "user_id": 54321, "action": "delete user", "title": "Delete Alice?"})]),
        ScriptedReply(tool_calls=[("OpenAPI__delete_user", {"user_id": "54321"})]),
        ScriptedReply("Alice is deleted.", expect="deleted"),
    ]  # fmt: skip
    with api_server() as server:
        server.answers["GET /api/users/search/name/Alice"] = [(200, {"id": "54321"})]
        server.answers["DELETE /api/users/54321"] = [(200, {"message": "deleted"})]
        agent, model = _sample_agent(folder, server.url, script)
        out = agent.step_sync("delete Alice")
    return agent, model, out


def test_liman_style_sample_with_openapi_tools_runs(tmp_path: Path):
    _, model, out = _run_sample(write(tmp_path, SAMPLE))
    assert (out.status, out.output) == ("completed", "Alice is deleted.")
    confirmed = model.calls[2][-1]
    assert confirmed.content == "delete user confirmed for 54321.0"  # number: a float
    system = model.calls[0][0].content
    assert "confirm_action - Ask before anything destructive.\n- please delete the user" in system
    assert "OpenAPI__list_users - List all users" in system


def test_liman_style_getting_started_folders_run(tmp_path: Path):
    chat = "kind: LLMNode\nname: chat\nprompts:\n  system:\n    en: |\n      Be polite.\n"
    simple = write(tmp_path / "simple", {"chat.yaml": chat})
    agent = Agent(simple, start_node="LLMNode/chat", llm=ScriptedModel(["Hello!"]))
    assert str(agent.step_sync("Hello, how are you?")) == "Hello!"

    tool = (
        "kind: ToolNode\nname: get_user_by_name\ndescription: Find a user by name\n"
        "func: main.get_user_by_name\narguments:\n  - name: user_name\n    type: string\n"
        "    description: The name\n"
    )
    folder = write(
        tmp_path / "tools",
        {"chat.yaml": chat + "tools:\n  - get_user_by_name\n", "get_user_tool.yaml": tool},
    )
    script = [
        ScriptedReply(tool_calls=[("get_user_by_name", {"user_name": "Alice"})]),
        "Alice is user 1.",
    ]
    found = {"main.get_user_by_name": lambda user_name: f"Found user: {user_name}"}
    model = ScriptedModel(script)
    agent = Agent(folder, start_node="LLMNode/chat", llm=model, functions=found)
    assert agent.step_sync("Who is Alice?").output == "Alice is user 1."
    assert model.calls[0][0].content == "Be polite.\n\nget_user_by_name - Find a user by name"


def test_functions_may_be_a_module(tmp_path: Path):
    tool = (
        "kind: ToolNode\nname: shout\ndescription: Shout\nfunc: main.upper\n"
        "arguments: [{name: text, type: str}]\n"
    )
    chat = "kind: LLMNode\nname: chat\nprompts: {system: Hi}\ntools: [shout]\n"
    module = type(sys)("main")
    module.upper = lambda text: text.upper()  # type: ignore[attr-defined]
    script = [
        ScriptedReply(tool_calls=[("shout", {"text": "hey"})]),
        ScriptedReply("ok", expect="HEY"),
    ]
    agent = Agent(
        write(tmp_path, {"c.yaml": chat, "t.yaml": tool}),
        "chat",
        llm=ScriptedModel(script),
        functions=module,
    )
    assert agent.step_sync("x").output == "ok"


def _copy(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir(parents=True)
    for name, source in files.items():
        shutil.copyfile(CORE_TESTS / source, folder / name)
    return folder


def test_liman_own_test_data_loads_and_its_broken_files_are_named(tmp_path: Path):
    good = {
        "node.yaml": "node/data/valid_node.yaml",
        "sa.yaml": "plugins/auth/data/valid_service_account.yaml",
    }
    folder = _copy(tmp_path, good)
    (folder / "chat.yaml").write_text(
        "kind: LLMNode\nname: chat\nprompts: {system: Hi}\nnodes: [TestNode]\n"
    )
    agent = Agent(
        folder,
        "chat",
        llm=ScriptedModel(["hi"]),
        functions={"test_function": lambda text: f"got {text}"},
    )
    out = agent.step_sync("x")
    assert out.output == "got hi"
    for name, needle in [
        ("node/data/invalid_node.yaml", "Node 'TestNode' has no 'func'"),
        ("node/data/malformed.yaml", "not valid YAML"),
        ("node/data/empty.yaml", "the file is empty"),
        ("plugins/auth/data/invalid_service_account.yaml", "gives nothing"),
        ("plugins/auth/data/malformed.yaml", "not valid YAML"),
    ]:
        broken = _copy(tmp_path / name.replace("/", "_"), {"bad.yaml": name})
        (broken / "chat.yaml").write_text("kind: LLMNode\nname: chat\nprompts: {system: Hi}\n")
        with pytest.raises(GraphConfigError, match=re.escape(needle)):
            Agent(broken, "chat", llm=ScriptedModel([]), functions={"test_function": print})


MULTI_API = """
kind: LLMNode
name: chat
tools: [Users__get_user, Billing__get_user]
"""


def test_two_apis_with_one_operation_id_go_into_one_agent_under_two_prefixes(tmp_path: Path):
    # Liman's create_tool_nodes(..., prefix=...): Users__get_user and Billing__get_user.
    script = [
        ScriptedReply(tool_calls=[("Users__get_user", {"user_id": "7"})]),
        ScriptedReply(tool_calls=[("Billing__get_user", {"user_id": "7"})]),
        ScriptedReply("Found in both."),
    ]
    with api_server() as users, api_server() as billing:
        users.answers["GET /api/users/7"] = [(200, {"name": "Ada"})]
        billing.answers["GET /api/users/7"] = [(200, {"plan": "pro"})]
        tools = openapi_tools(USERS_API, base_url=users.url, prefix="Users")
        tools += openapi_tools(USERS_API, base_url=billing.url, prefix="Billing")
        model = ScriptedModel(script)
        agent = Agent(write(tmp_path, {"chat.yaml": MULTI_API}), "chat", llm=model, tools=tools)
        out = agent.step_sync("who is 7?")
    assert out.output == "Found in both."
    assert [r["route"] for r in users.requests] == ["GET /api/users/7"]
    assert [r["route"] for r in billing.requests] == ["GET /api/users/7"]
    read = [m.content for m in model.calls[-1] if getattr(m, "role", "") == "tool"]
    assert read == ['{"name":"Ada"}', '{"plan":"pro"}']
    with pytest.raises(GraphConfigError, match=r"prefix='Us ers'; pass letters, digits"):
        openapi_tools(USERS_API, base_url=users.url, prefix="Us ers")
