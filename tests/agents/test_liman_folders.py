"""Liman's own spec folders run unchanged under ``Agent``, with a scripted model.

The folders in tests/data/liman/ are those of Liman's getting-started guides and of its
``simple_openapi`` sample (see the README there). Each test plays the conversation the
guide or the sample's README shows: the model is a ``ScriptedModel`` whose replies call
the folder's tools, and the OpenAPI tools call a real HTTP server on 127.0.0.1 that
answers as the sample's server does (``users_server.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from users_server import UsersApi, users_api

from nodestep import Agent, ScriptedModel, ScriptedReply
from nodestep.agents import openapi_tools, tool

pytestmark = pytest.mark.anyio
LIMAN = Path(__file__).resolve().parent.parent / "data" / "liman"
GUIDES = LIMAN / "getting_started"
GUIDE_PROMPT = "You are a helpful assistant.\nAlways be polite and provide clear answers."
GUIDE_USERS = [
    {"id": "1", "name": "Alice", "email": "alice@example.com"},
    {"id": "2", "name": "Bob", "email": "bob@example.com"},
]


def get_user_by_name(user_name: str) -> str:
    """The function the "Adding tools" guide writes in its main.py, written anew."""
    for user in GUIDE_USERS:
        if user["name"].lower() == user_name.lower():
            return f"Found user: {user['name']} (ID: {user['id']}, Email: {user['email']})"
    return f"User '{user_name}' not found. Available users: Alice, Bob"


def system_prompt(model: ScriptedModel) -> str:
    first = model.calls[-1][0]
    assert first.role == "system"
    return str(first.content)


def conversation(model: ScriptedModel) -> list[tuple[str, str]]:
    """The last conversation the model saw, after the system prompt, as (role, text)."""
    return [(m.role, m.content) for m in model.calls[-1][1:]]


def openapi_tools_of(api: UsersApi) -> Any:
    """The API's tools, from the document it serves, as Liman's load_openapi reads it."""
    spec = httpx.get(f"{api.url}/openapi.json").json()
    return openapi_tools(spec, base_url=api.url)


async def test_the_simple_agent_guide_folder_chats_and_remembers_the_conversation() -> None:
    model = ScriptedModel(
        [
            ScriptedReply("Hello! I'm here and ready to help you.", expect="how are you?"),
            ScriptedReply("2 + 2 is 4.", expect="What's 2+2?"),
        ]
    )
    agent = Agent(GUIDES / "simple_agent" / "specs", start_node="LLMNode/chat", llm=model)

    first = await agent.step("Hello, how are you?")
    second = await agent.step("What's 2+2?")

    assert (first.status, first.output) == ("completed", "Hello! I'm here and ready to help you.")
    assert (second.status, second.output) == ("completed", "2 + 2 is 4.")
    assert second.execution_id == first.execution_id
    assert system_prompt(model).startswith(GUIDE_PROMPT)
    assert conversation(model) == [
        ("user", "Hello, how are you?"),
        ("assistant", "Hello! I'm here and ready to help you."),
        ("user", "What's 2+2?"),
    ]


@tool
def OpenAPI_getUser(user_id: str) -> str:  # the name poc.mdx's LLMNode lists
    """Get a user by their id."""
    return f"user {user_id}"


async def test_the_poc_llmnode_loads_with_its_null_note_and_answers_in_two_languages() -> None:
    # `notes: {en: { notes }}` is YAML's mapping of notes to null: no text, as Liman reads it.
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("OpenAPI_getUser", {"user_id": "7"})]),
            ScriptedReply("User 7.", expect="user 7"),
            "Пользователь 7.",
        ]
    )
    agent = Agent(
        LIMAN / "poc" / "llm_node" / "specs", "StartNode", llm=model, tools=[OpenAPI_getUser]
    )

    first = await agent.step("Who is 7?")
    english = system_prompt(model)
    second = await agent.step("Кто это?", context={"lang": "ru"})

    assert (first.output, second.output) == ("User 7.", "Пользователь 7.")
    # A `|` block keeps its last newline, so a blank line comes before the tools, as in Liman.
    tools = "\n\nOpenAPI_getUser - Get a user by their id."
    assert english == "You are a helpful assistant." + tools
    assert system_prompt(model) == "Ты полезный помощник." + tools
    assert "notes" not in english + system_prompt(model)


async def test_the_adding_tools_guide_folder_calls_its_function_by_the_func_path() -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("get_user_by_name", {"user_name": "Alice"})]),
            ScriptedReply("Alice's email is alice@example.com.", expect="ID: 1"),
            ScriptedReply(
                tool_calls=[
                    ("get_user_by_name", {"user_name": "Bob"}),
                    ("get_user_by_name", {"user_name": "Pavel"}),
                ]
            ),
            ScriptedReply("Bob: bob@example.com; no user named Pavel.", expect="'Pavel' not"),
        ]
    )
    agent = Agent(
        GUIDES / "adding_tools" / "specs",
        start_node="LLMNode/chat",
        llm=model,
        functions={"main.get_user_by_name": get_user_by_name},
    )

    first = await agent.step("Who is Alice?")
    second = await agent.step("What emails Bob and Pavel have?")

    assert first.output == "Alice's email is alice@example.com."
    assert second.output == "Bob: bob@example.com; no user named Pavel."
    assert "get_user_by_name - Find a specific user by their name" in system_prompt(model)
    # Two calls in one reply: both results, in the order of the calls.
    assert [text for role, text in conversation(model) if role == "tool"][-2:] == [
        "Found user: Bob (ID: 2, Email: bob@example.com)",
        "User 'Pavel' not found. Available users: Alice, Bob",
    ]


async def test_the_openapi_guide_folder_calls_the_api_as_openapi_get_user() -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("OpenAPI__get_user", {"user_id": "54321"})]),
            ScriptedReply("Alice is alice@example.com.", expect="alice@example.com"),
        ]
    )
    with users_api() as api:
        agent = Agent(
            GUIDES / "openapi_integration" / "specs",
            start_node="LLMNode/chat",
            llm=model,
            functions={"main.get_user_by_name": get_user_by_name},
            tools=openapi_tools_of(api),
        )
        out = await agent.step("Who is Alice?")

    assert (out.status, out.output) == ("completed", "Alice is alice@example.com.")
    assert ("GET", "/users/54321", None) in api.requests
    assert "OpenAPI__get_user - Get a user by their ID" in system_prompt(model)


def confirm_destructive_action(title: str, action: str, user_id: str) -> str:
    """The sample's confirmation, answered yes instead of asking on the terminal."""
    confirmed.append((title, action, user_id))
    return f"{action} confirmed. User ID: {user_id}"


confirmed: list[tuple[str, str, Any]] = []


@pytest.mark.slow
async def test_the_simple_openapi_sample_changes_an_email_and_disables_the_eu_admins() -> None:
    confirmed.clear()
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("OpenAPI__search_user", {"name": "Alice"})]),
            ScriptedReply(
                tool_calls=[
                    (
                        "confirm_action",
                        {"user_id": 54321, "action": "update user", "title": "Change email"},
                    )
                ],
                expect='"id":"54321"',
            ),
            ScriptedReply(
                tool_calls=[
                    (
                        "OpenAPI__update_user",
                        {"user_id": "54321", "body": {"email": "x@example.com"}},
                    )
                ],
                expect="confirmed",
            ),
            ScriptedReply("Alice's email is now x@example.com.", expect='"was_changed":true'),
            ScriptedReply(tool_calls=[("OpenAPI__search_by_region", {"region": "EU"})]),
            ScriptedReply(
                tool_calls=[
                    ("OpenAPI__get_user", {"user_id": "67890"}),
                    ("OpenAPI__get_user", {"user_id": "17821"}),
                    ("OpenAPI__get_user", {"user_id": "99821"}),
                ],
                expect="99821",
            ),
            ScriptedReply(
                tool_calls=[
                    (
                        "OpenAPI__update_user",
                        {"user_id": "67890", "body": {"is_admin": False}},
                    )
                ],
                expect="Bob",
            ),
            ScriptedReply("Max was the only admin in the EU; he is not any more."),
        ]
    )
    with users_api() as api:
        agent = Agent(
            LIMAN / "samples" / "simple_openapi" / "specs",
            start_node="LLMNode/chat",
            llm=model,
            functions={"main.confirm_destructive_action": confirm_destructive_action},
            tools=openapi_tools_of(api),
        )
        first = await agent.step("change email of Alice to x@example.com")
        second = await agent.step("disable all admins in EU region")

    assert first.output == "Alice's email is now x@example.com."
    assert second.output == "Max was the only admin in the EU; he is not any more."
    assert api.users["54321"]["email"] == "x@example.com"
    assert [u["name"] for u in api.users.values() if u["is_admin"]] == ["John"]
    # The tool's argument is declared a number: the function gets a float.
    assert confirmed == [("Change email", "update user", 54321.0)]
    assert isinstance(confirmed[0][2], float)
    prompt = system_prompt(model)
    assert "confirm_action - You need to call this function on any destructive" in prompt
    assert "please delete the user" in prompt  # the tool's triggers
    # The three reads ran concurrently; their results came back in the order of the calls.
    reads = [text for role, text in conversation(model) if role == "tool"][-4:-1]
    assert [json.loads(text)["name"] for text in reads] == ["Max", "Sofia", "Bob"]
