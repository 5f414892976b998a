"""ServiceAccounts: values injected from the call's context, and credentials that reach the
tool call and nothing else."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from specs_helpers import CHAT, write

from nodestep import (
    Agent,
    Credentials,
    CredentialsProvider,
    FilesystemStateStore,
    NodeContext,
    ScriptedModel,
    SQLiteStateStore,
)
from nodestep.agents import ScriptedReply, openapi_tools

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/agents: the real HTTP server
from api_server import api_server

SECRET = "sk-live-agent-0042"

ACCOUNT = """
kind: ServiceAccount
name: crm
context:
  strict: true
  inject:
    - user_id: user.id
    - organization.id
credentials_provider: CRMToken
"""
TOOL = """
kind: ToolNode
name: get_user
description: Look up the caller's record
func: crm.lookup
arguments:
  - name: field
    type: string
auth:
  service_account: crm
"""
NOSY = """
kind: ToolNode
name: nosy
description: Tries to read the CRM token
func: crm.nosy
auth:
  service_account:
    context: {inject: [user.id]}
"""


def _agent(tmp_path: Path, script: list[Any], functions: dict[str, Any], **options: Any) -> Agent:
    chat = CHAT.replace("  - get_user\n", "  - get_user\n  - nosy\n")
    files = {"chat.yaml": chat, "tool.yaml": TOOL, "sa.yaml": ACCOUNT, "nosy.yaml": NOSY}
    return Agent(
        write(tmp_path, files), "chat", llm=ScriptedModel(script), functions=functions, **options
    )


def test_injected_values_and_credentials_reach_the_tool_call(tmp_path: Path):
    got: dict[str, Any] = {}

    def lookup(field: str, user_id: int, organization: dict[str, Any], token: Credentials) -> str:
        got.update(field=field, user_id=user_id, organization=organization, token=token.secret())
        return "found"

    def nosy(user: dict[str, Any], ctx: NodeContext) -> str:
        return str(ctx.credentials("CRMToken").secret())

    script = [
        ScriptedReply(tool_calls=[("get_user", {"field": "email"})]),
        ScriptedReply("done", expect="found"),
    ]
    agent = _agent(tmp_path, script, {"crm.lookup": lookup, "crm.nosy": nosy})
    context = {"user": {"id": 7}, "organization": {"id": "org-9"}}
    out = agent.step_sync(
        "my email?", context=context, credentials=CredentialsProvider({"CRMToken": SECRET})
    )
    assert out.output == "done"
    assert got == {"field": "email", "user_id": 7, "organization": {"id": "org-9"}, "token": SECRET}
    # The model is never shown the injected values as arguments it could set.
    spec = agent.graph.nodes["get_user"]
    assert spec.roles == ("CRMToken",)
    assert agent.graph.nodes["nosy"].roles == ()


def test_a_tool_without_the_role_cannot_read_the_credentials(tmp_path: Path):
    def nosy(user: dict[str, Any], ctx: NodeContext) -> str:
        return str(ctx.credentials("CRMToken").secret())

    script = [ScriptedReply(tool_calls=[("nosy", {})]), "never"]
    agent = _agent(tmp_path, script, {"crm.lookup": lambda field: "", "crm.nosy": nosy})
    provider = CredentialsProvider({"CRMToken": SECRET})
    out = agent.step_sync("x", context={"user": {"id": 1}}, credentials=provider)
    assert out.status == "failed" and out.failed_nodes == ("nosy",)
    assert "CredentialsError" in (out.error or "") and SECRET not in (out.error or "")


def test_a_missing_injected_value_fails_the_step_naming_the_path(tmp_path: Path):
    script = [ScriptedReply(tool_calls=[("get_user", {"field": "email"})]), "never"]
    agent = _agent(
        tmp_path,
        script,
        {"crm.lookup": lambda field, user_id, organization: "", "crm.nosy": lambda user: ""},
    )
    out = agent.step_sync(
        "x", context={"user": {"id": 1}}, credentials=CredentialsProvider({"CRMToken": SECRET})
    )
    assert out.status == "failed"
    assert "injects 'organization.id' from the call's context, which has no such value" in (
        out.error or ""
    )


def test_openapi_operations_are_tools_named_openapi_operation_id(tmp_path: Path):
    document = {
        "openapi": "3.0.0",
        "paths": {
            "/users/{user_name}": {
                "get": {
                    "operationId": "get_user",
                    "summary": "Get a user by their name",
                    "parameters": [
                        {
                            "name": "user_name",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                }
            }
        },
    }
    chat = CHAT.replace("  - get_user\n", "  - OpenAPI__get_user\n")
    script = [
        ScriptedReply(
            tool_calls=[
                ("OpenAPI__get_user", {"user_name": "Alice"}),
                ("OpenAPI__get_user", {"user_name": "Pavel"}),
            ]
        ),
        ScriptedReply("Alice is alice@example.com; there is no Pavel.", expect="HTTP 404"),
    ]
    model = ScriptedModel(script)
    with api_server() as server:
        server.answers["GET /api/users/Alice"] = [
            (200, {"name": "Alice", "email": "alice@example.com"})
        ]
        tools = openapi_tools(document, base_url=server.url, role="users")
        agent = Agent(
            write(tmp_path, {"chat.yaml": chat}),
            "chat",
            llm=model,
            tools=tools,
            credentials=CredentialsProvider({"users": SECRET}),
        )
        out = agent.step_sync("What emails do Alice and Pavel have?")
    assert out.output == "Alice is alice@example.com; there is no Pavel."
    assert [r["headers"]["Authorization"] for r in server.requests] == [f"Bearer {SECRET}"] * 2
    found, missing = model.calls[1][-2:]
    assert (found.status, missing.status) == ("ok", "error")
    assert '"email":"alice@example.com"' in found.content and "HTTP 404" in missing.content
    assert "OpenAPI__get_user - Get a user by their name" in model.calls[0][0].content


def test_tools_must_be_tools(tmp_path: Path):
    with pytest.raises(Exception, match="takes tools made with @tool or openapi_tools"):
        Agent(
            write(tmp_path, {"chat.yaml": CHAT.replace("tools:\n  - get_user\n", "")}),
            "chat",
            llm=ScriptedModel([]),
            tools=[print],
        )


ORDERS = """
kind: LLMNode
name: chat
tools: [my_orders]
nodes: [send]
---
kind: ToolNode
name: my_orders
description: The caller's open orders
func: shop.my_orders
arguments: [{name: refuse, type: boolean}]
auth: {service_account: orders_api}
---
kind: ServiceAccount
name: orders_api
credentials_provider: orders-token
---
kind: Node
name: send
func: shop.send
auth: {service_account: orders_api}
"""


def _stored(tmp_path: Path, kind: str) -> Any:
    if kind == "file":
        return FilesystemStateStore(tmp_path / "h.jsonl")
    return SQLiteStateStore(tmp_path / "h.db")


def _written(tmp_path: Path, store: Any) -> bytes:
    anyio.run(store.aclose)
    return b"".join(
        p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "specs" not in p.parts
    )


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_secret_in_a_tools_error_or_result_is_masked_where_it_is_stored(
    tmp_path: Path, kind: str
):
    # An HTTP client's error that echoes the request's auth header, and a result that
    # echoes it: the model, the node's record and the store get `**********`.
    def my_orders(refuse: bool, token: Credentials) -> str:
        if refuse:
            raise PermissionError(f"401 for Authorization: Bearer {token.secret()}")
        return f"orders of {token.secret()}"

    script = [
        ScriptedReply(tool_calls=[("my_orders", {"refuse": True})]),
        ScriptedReply(tool_calls=[("my_orders", {"refuse": False})]),
        "Sorry.",
    ]
    model = ScriptedModel(script)
    store = _stored(tmp_path, kind)
    functions = {"shop.my_orders": my_orders, "shop.send": lambda text: text}
    agent = Agent(
        write(tmp_path, {"chat.yaml": ORDERS}),
        "chat",
        llm=model,
        state_store=store,
        functions=functions,
    )
    out = agent.step_sync("My orders?", credentials=CredentialsProvider({"orders-token": SECRET}))
    assert out.output == "Sorry."
    refused, listed = model.calls[1][-1].content, model.calls[2][-1].content
    assert (
        refused
        == "Error: my_orders raised PermissionError: 401 for Authorization: Bearer **********"
    )
    assert listed == "orders of **********"
    assert agent.node_state_sync("my_orders").output == "orders of **********"
    assert SECRET not in repr(agent.graph.history_sync(out.execution_id))
    assert SECRET.encode() not in _written(tmp_path, store)


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_secret_in_a_nodes_failure_is_masked_in_its_record_and_the_store(
    tmp_path: Path, kind: str
):
    def send(text: str, key: Credentials) -> str:
        raise RuntimeError(f"bad key {key.secret()}")

    store = _stored(tmp_path, kind)
    functions = {"shop.my_orders": lambda refuse: "", "shop.send": send}
    agent = Agent(
        write(tmp_path, {"chat.yaml": ORDERS}),
        "chat",
        llm=ScriptedModel(["Mail it."]),
        state_store=store,
        functions=functions,
    )
    out = agent.step_sync("go", credentials=CredentialsProvider({"orders-token": SECRET}))
    assert (out.status, out.failed_nodes) == ("failed", ("send",))
    assert out.error == "RuntimeError: bad key **********"
    assert agent.node_state_sync("send").error == "RuntimeError: bad key **********"
    written = _written(tmp_path, store)
    assert b"run_failed" in written and SECRET.encode() not in written
