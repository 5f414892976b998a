"""OpenAPI tools against a real HTTP server on 127.0.0.1: arguments, credentials, errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from api_server import Raw, api_server
from pydantic import ValidationError

from nodestep import (
    CredentialsError,
    CredentialsProvider,
    FilesystemStateStore,
    GraphConfigError,
    InMemoryStateStore,
    OpenAPICallError,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
)
from nodestep.agents import openapi_tools, tool_node

pytestmark = pytest.mark.anyio
SECRET = "tok-5ecret-7f3a9c"

PETS: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Pets", "version": "1"},
    "security": [{"bearer": []}],
    "components": {
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            "query_key": {"type": "apiKey", "in": "query", "name": "api_key"},
        },
        "schemas": {
            "NewPet": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "description": "The pet's name."},
                    "tag": {"type": "string", "enum": ["cat", "dog"]},
                },
            }
        },
    },
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List the pets.",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "page-token", "in": "query", "schema": {"type": "string"}},
                ],
            },
            "post": {
                "operationId": "createPet",
                "summary": "Add a pet.",
                "security": [{"key": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}
                    },
                },
            },
        },
        "/pets/{petId}": {
            "parameters": [
                {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}}
            ],
            "get": {"operationId": "getPet", "summary": "Show one pet."},
            "delete": {"operationId": "deletePet", "security": [{"query_key": []}]},
        },
    },
}


def _tools(url: str, **options: Any) -> dict[str, Any]:
    return {t.name: t for t in openapi_tools(PETS, base_url=url, role="pets", **options)}


class _Ctx:
    """A stand-in for the tool node's context, to call one tool directly."""

    def __init__(self, secret: Any) -> None:
        self.secret = secret

    def credentials(self, role: str) -> Any:
        from nodestep import Credentials

        return Credentials(role, self.secret)


def test_each_operation_becomes_a_tool_with_the_json_schema_of_its_arguments():
    tools = _tools("http://127.0.0.1:9")
    assert list(tools) == ["listPets", "createPet", "getPet", "deletePet"]
    assert tools["listPets"].description == "List the pets."
    assert tools["deletePet"].description == "DELETE /pets/{petId}"
    listing = tools["listPets"].spec["parameters"]
    assert set(listing["properties"]) == {"limit", "page-token"}
    assert listing.get("required", []) == []
    assert tools["getPet"].spec["parameters"]["required"] == ["petId"]
    body = tools["createPet"].spec["parameters"]
    assert body["required"] == ["body"]
    assert all(t.roles == ("pets",) for t in tools.values())


def test_arguments_are_validated_against_the_schemas():
    tools = _tools("http://127.0.0.1:9")
    assert tools["getPet"].validate({"petId": "7"}) == {"petId": 7}
    assert tools["createPet"].validate({"body": {"name": "Rex"}}) == {"body": {"name": "Rex"}}
    with pytest.raises(ValidationError):
        tools["getPet"].validate({})
    with pytest.raises(ValidationError):
        tools["createPet"].validate({"body": {"name": "Rex", "tag": "horse"}})
    with pytest.raises(ValidationError):
        tools["createPet"].validate({"body": {"name": "Rex", "owner": "me"}})
    with pytest.raises(ValidationError):
        tools["listPets"].validate({"limit": 3, "colour": "red"})


async def test_the_request_carries_path_query_body_and_the_header_of_the_scheme():
    with api_server() as server:
        server.answers["GET /api/pets/7"] = [(200, {"id": 7, "name": "Rex"})]
        server.answers["GET /api/pets"] = [(200, [])]
        server.answers["POST /api/pets"] = [(201, {"id": 8})]
        server.answers["DELETE /api/pets/7"] = [(204, {})]
        tools = _tools(server.url)
        ctx = _Ctx(SECRET)
        assert await tools["getPet"].ainvoke({"petId": 7}, ctx=ctx) == {"id": 7, "name": "Rex"}
        await tools["listPets"].ainvoke({"limit": 2, "page-token": "a b"}, ctx=ctx)
        await tools["createPet"].ainvoke({"body": {"name": "Tom", "tag": "cat"}}, ctx=ctx)
        await tools["deletePet"].ainvoke({"petId": 7}, ctx=ctx)
    get, listing, create, delete = server.requests
    assert get["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert listing["query"] == {"limit": "2", "page-token": "a b"}
    assert create["body"] == {"name": "Tom", "tag": "cat"}
    assert create["headers"]["X-API-Key"] == SECRET and "Authorization" not in create["headers"]
    assert delete["query"] == {"api_key": SECRET}


async def test_a_provider_that_returns_a_dict_gives_the_headers_themselves():
    with api_server() as server:
        server.answers["GET /api/pets/1"] = [(200, {"id": 1})]
        await _tools(server.url)["getPet"].ainvoke({"petId": 1}, ctx=_Ctx({"X-Token": SECRET}))
    assert server.requests[0]["headers"]["X-Token"] == SECRET


async def test_a_tool_without_a_role_sends_no_credentials():
    with api_server() as server:
        server.answers["GET /api/pets/1"] = [(200, {"id": 1})]
        tools = {t.name: t for t in openapi_tools(PETS, base_url=server.url)}
        await tools["getPet"].ainvoke({"petId": 1})
    assert "Authorization" not in server.requests[0]["headers"]
    assert tools["getPet"].roles == ()


async def test_a_4xx_or_5xx_answer_is_an_openapi_call_error_naming_the_status():
    with api_server() as server:
        server.answers["GET /api/pets/9"] = [(404, {"detail": "no pet 9"})]
        server.answers["GET /api/pets"] = [(503, {"detail": "down"})]
        tools = _tools(server.url)
        with pytest.raises(
            OpenAPICallError, match=r"getPet \(GET /pets/\{petId\}\) answered HTTP 404.*no pet 9"
        ) as caught:
            await tools["getPet"].ainvoke({"petId": 9}, ctx=_Ctx(SECRET))
        assert caught.value.status == 404
        with pytest.raises(OpenAPICallError, match="HTTP 503"):
            await tools["listPets"].ainvoke({}, ctx=_Ctx(SECRET))


async def test_an_unreachable_server_is_an_openapi_call_error():
    tools = _tools("http://127.0.0.1:9/api")  # port 9: nothing listens
    with pytest.raises(OpenAPICallError, match="could not reach") as caught:
        await tools["getPet"].ainvoke({"petId": 1}, ctx=_Ctx(SECRET))
    assert caught.value.status is None


async def test_an_answer_that_echoes_the_secret_is_redacted():
    with api_server() as server:
        server.answers["GET /api/pets/1"] = [(200, {"you_sent": f"Bearer {SECRET}"})]
        server.answers["GET /api/pets/2"] = [(401, {"bad": SECRET})]
        tools = _tools(server.url)
        answer = await tools["getPet"].ainvoke({"petId": 1}, ctx=_Ctx(SECRET))
        with pytest.raises(OpenAPICallError) as caught:
            await tools["getPet"].ainvoke({"petId": 2}, ctx=_Ctx(SECRET))
    assert SECRET not in json.dumps(answer) and SECRET not in str(caught.value)


async def test_a_tool_with_a_role_needs_the_node_context():
    with pytest.raises(GraphConfigError, match="needs the node's context"):
        await _tools("http://127.0.0.1:9")["getPet"].ainvoke({"petId": 1})


async def test_a_secret_of_a_kind_that_cannot_be_sent_is_a_credentials_error_without_it():
    with pytest.raises(CredentialsError, match="type int") as caught:
        await _tools("http://127.0.0.1:9")["getPet"].ainvoke({"petId": 1}, ctx=_Ctx(12345))
    assert "12345" not in str(caught.value)


def _agent(url: str, store: Any) -> Any:
    script = [
        ScriptedReply(tool_calls=[("getPet", {"petId": 7}), ("getPet", {"petId": 9})]),
        ScriptedReply("Rex is pet 7; there is no pet 9.", expect="no pet 9"),
    ]
    return create_react_agent(ScriptedModel(script), _tools(url).values(), state_store=store)


def test_in_an_agent_the_header_arrives_and_an_error_answer_goes_back_to_the_model(
    tmp_path: Path,
):
    with api_server() as server:
        server.answers["GET /api/pets/7"] = [(200, {"id": 7, "name": "Rex"})]
        server.answers["GET /api/pets/9"] = [(404, {"detail": "no pet 9"})]
        agent = _agent(server.url, FilesystemStateStore(tmp_path / "h"))
        provider = CredentialsProvider({"pets": SECRET})
        result = agent.invoke(
            {"messages": ["Show pets 7 and 9."]}, thread_id="t", credentials=provider
        )
    assert [r["headers"]["Authorization"] for r in server.requests] == [f"Bearer {SECRET}"] * 2
    found, missing = result.state.messages[2:4]
    assert json.loads(found.content) == {"id": 7, "name": "Rex"} and found.status == "ok"
    assert missing.status == "error" and "HTTP 404" in missing.content
    assert result.state.messages[-1].content == "Rex is pet 7; there is no pet 9."


def test_no_byte_the_stores_write_and_no_stream_event_holds_the_secret(tmp_path: Path):
    caught: list[str] = []
    with api_server() as server:
        server.answers["GET /api/pets/7"] = [(200, {"id": 7})]
        server.answers["GET /api/pets/9"] = [(500, {"detail": "no pet 9"})]
        agent = _agent(server.url, FilesystemStateStore(tmp_path / "h"))
        provider = CredentialsProvider({"pets": SECRET})
        for event in agent.stream(
            {"messages": ["Show pets 7 and 9."]},
            thread_id="t",
            credentials=provider,
            stream_mode=["updates", "values", "messages", "debug", "custom"],
        ):
            caught.append(repr(event))
        no_provider = _agent(server.url, FilesystemStateStore(tmp_path / "h"))
        with pytest.raises(CredentialsError) as failed:
            no_provider.invoke({"messages": ["again"]}, thread_id="u")
        caught.append(str(failed.value))
        caught.append(repr(agent.history_sync("t")))
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"run_failed" in written and b"HTTP 500" in written
    assert SECRET.encode() not in written
    assert SECRET not in "\n".join(caught)


def test_the_tool_node_declares_the_roles_of_its_tools():
    tools = list(_tools("http://127.0.0.1:9").values())
    assert tool_node(tools).roles == ("pets",)


def test_operations_selects_tools_in_order_and_an_unknown_one_lists_the_known():
    names = [
        t.name for t in openapi_tools(PETS, base_url="http://x", operations=["getPet", "listPets"])
    ]
    assert names == ["getPet", "listPets"]
    with pytest.raises(GraphConfigError, match=r"no operation 'adoptPet'.*'listPets', 'createPet'"):
        openapi_tools(PETS, base_url="http://x", operations=["adoptPet"])


def test_the_document_may_be_a_json_or_yaml_file(tmp_path: Path):
    pytest.importorskip("yaml")
    import yaml

    (tmp_path / "pets.json").write_text(json.dumps(PETS))
    (tmp_path / "pets.yaml").write_text(yaml.safe_dump(PETS))
    for name in ("pets.json", "pets.yaml"):
        assert len(openapi_tools(tmp_path / name, base_url="http://x")) == 4


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"openapi": "3.1.0"}, "without a 'paths' object"),
        (42, "as a dict or a file path, got int"),
        ("/no/such/file.json", "could not read the OpenAPI document"),
        (
            {"paths": {"/a": {"get": {"operationId": "a", "parameters": ["oops"]}}}},
            "has a parameter 'oops'",
        ),
        (
            {
                "paths": {
                    "/a": {
                        "get": {
                            "operationId": "a",
                            "parameters": [
                                {"name": "page-size", "in": "query"},
                                {"name": "page_size", "in": "query"},
                            ],
                        }
                    }
                }
            },
            "two parameters named like 'page_size'",
        ),
        (
            {
                "paths": {
                    "/a": {
                        "get": {
                            "operationId": "a",
                            "parameters": [{"name": "X-Trace", "in": "header", "required": True}],
                        }
                    }
                }
            },
            "needs the header parameter 'X-Trace'",
        ),
        (
            {
                "paths": {
                    "/a": {
                        "post": {
                            "operationId": "a",
                            "requestBody": {"required": True, "content": {"text/plain": {}}},
                        }
                    }
                }
            },
            "request body that is not JSON",
        ),
        (
            {
                "paths": {
                    "/a": {
                        "get": {
                            "operationId": "a",
                            "parameters": [{"$ref": "#/components/parameters/nope"}],
                        }
                    }
                }
            },
            "points at nothing",
        ),
    ],
)
def test_a_document_that_cannot_make_tools_is_a_config_error_saying_why(spec, match):
    with pytest.raises(GraphConfigError, match=match):
        openapi_tools(spec, base_url="http://x")


def test_a_missing_httpx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[openapi\]'"):
        openapi_tools(PETS, base_url="http://x")


def test_a_memory_store_run_keeps_no_secret_either():
    with api_server() as server:
        server.answers["GET /api/pets/7"] = [(200, {"id": 7})]
        server.answers["GET /api/pets/9"] = [(404, {"detail": "no pet 9"})]
        store = InMemoryStateStore()
        agent = _agent(server.url, store)
        agent.invoke(
            {"messages": ["hi"]}, thread_id="t", credentials=CredentialsProvider({"pets": SECRET})
        )
        assert SECRET not in repr(agent.history_sync("t"))


def test_approve_marks_every_operation_or_the_named_ones():
    everything = openapi_tools(PETS, base_url="http://x", approve=True)
    assert all(t.approve for t in everything)
    named = {
        t.name: t.approve for t in openapi_tools(PETS, base_url="http://x", approve=["deletePet"])
    }
    assert named == {"listPets": False, "createPet": False, "getPet": False, "deletePet": True}
    with pytest.raises(GraphConfigError, match="approve=\\['adopt'\\]"):
        openapi_tools(PETS, base_url="http://x", approve=["adopt"])


def test_a_call_waiting_for_approval_runs_once_after_the_yes():
    from nodestep import Resume

    with api_server() as server:
        server.answers["DELETE /api/pets/7"] = [(204, {})]
        tools = openapi_tools(PETS, base_url=server.url, role="pets", approve=["deletePet"])
        script = [
            ScriptedReply(tool_calls=[("deletePet", {"petId": 7})]),
            ScriptedReply("Deleted."),
        ]
        agent = create_react_agent(ScriptedModel(script), tools, state_store=InMemoryStateStore())
        provider = CredentialsProvider({"pets": SECRET})
        paused = agent.invoke({"messages": ["Delete pet 7."]}, thread_id="t", credentials=provider)
        assert paused.interrupts and server.requests == []
        done = agent.invoke(
            None, thread_id="t", resume=Resume({"approve": True}), credentials=provider
        )
    assert done.state.messages[-1].content == "Deleted."
    assert [r["route"] for r in server.requests] == ["DELETE /api/pets/7"]


PEOPLE: dict[str, Any] = {
    "openapi": "3.1.0",
    "paths": {
        "/people": {
            "post": {
                "operationId": "createPerson",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["first-name"],
                                "properties": {
                                    "first-name": {"type": "string"},
                                    "_id": {"type": "string"},
                                    "2fa": {"type": "boolean"},
                                    "home-address": {
                                        "type": "object",
                                        "properties": {"post-code": {"type": "string"}},
                                    },
                                },
                            }
                        }
                    },
                },
            }
        }
    },
}


async def test_body_properties_are_sent_under_the_documents_names_nested_ones_too():
    body = {"first-name": "Ada", "_id": "p-1", "2fa": True, "home-address": {"post-code": "N1"}}
    with api_server() as server:
        server.answers["POST /api/people"] = [(201, {"id": "p-1"})]
        (tool,) = openapi_tools(PEOPLE, base_url=server.url)
        await tool.ainvoke({"body": body})
    assert server.requests[0]["body"] == body


@pytest.mark.parametrize(
    "media", ["application/json;charset=UTF-8", "application/vnd.api+json", "Application/JSON"]
)
async def test_a_json_body_of_any_json_media_type_is_sent_with_that_type(media: str):
    doc = {
        "openapi": "3.0.1",
        "paths": {
            "/orders": {
                "post": {
                    "operationId": "createOrder",
                    "requestBody": {
                        "required": True,
                        "content": {media: {"schema": {"type": "object"}}},
                    },
                }
            }
        },
    }
    with api_server() as server:
        server.answers["POST /api/orders"] = [(201, {"id": 1})]
        (tool,) = openapi_tools(doc, base_url=server.url)
        assert await tool.ainvoke({"body": {"item": "tent"}}) == {"id": 1}
    assert server.requests[0]["body"] == {"item": "tent"}
    assert server.requests[0]["headers"]["Content-Type"] == media


async def test_an_answer_of_a_json_media_type_with_parameters_or_a_suffix_is_decoded():
    with api_server() as server:
        server.answers["GET /api/pets/1"] = [
            (200, Raw(b'{"id": 1}', "application/json; charset=UTF-8"))
        ]
        server.answers["GET /api/pets/2"] = [(200, Raw(b'{"id": 2}', "application/vnd.api+json"))]
        tools = _tools(server.url)
        assert await tools["getPet"].ainvoke({"petId": 1}, ctx=_Ctx(SECRET)) == {"id": 1}
        assert await tools["getPet"].ainvoke({"petId": 2}, ctx=_Ctx(SECRET)) == {"id": 2}


def _query_doc(schema: dict[str, Any], **style: Any) -> dict[str, Any]:
    param = {"name": "filter", "in": "query", "schema": schema, **style}
    return {
        "openapi": "3.1.0",
        "paths": {"/tickets": {"get": {"operationId": "listTickets", "parameters": [param]}}},
    }


OBJECT = {"type": "object", "properties": {"status": {"type": "string"}, "ok": {}}}
ARRAY = {"type": "array", "items": {"type": "integer"}}


@pytest.mark.parametrize(
    ("schema", "style", "value", "query"),
    [
        (OBJECT, {}, {"status": "open", "ok": True}, "status=open&ok=true"),
        (OBJECT, {"explode": False}, {"status": "open"}, "filter=status%2Copen"),
        (OBJECT, {"style": "deepObject"}, {"status": "open"}, "filter%5Bstatus%5D=open"),
        (ARRAY, {}, [1, 2], "filter=1&filter=2"),
        (ARRAY, {"explode": False}, [1, 2], "filter=1%2C2"),
        (ARRAY, {"style": "pipeDelimited", "explode": False}, [1, 2], "filter=1%7C2"),
        (ARRAY, {"style": "spaceDelimited", "explode": False}, [1, 2], "filter=1+2"),
    ],
)
async def test_an_array_or_object_query_argument_is_sent_in_the_parameters_style(
    schema: dict[str, Any], style: dict[str, Any], value: Any, query: str
):
    with api_server() as server:
        server.answers["GET /api/tickets"] = [(200, [])]
        (tool,) = openapi_tools(_query_doc(schema, **style), base_url=server.url)
        await tool.ainvoke({"filter": value})
    assert server.requests[0]["raw_query"] == query


def test_a_style_tools_do_not_send_is_refused_at_load():
    doc = _query_doc({"type": "string"}, style="matrix")
    with pytest.raises(GraphConfigError) as caught:
        openapi_tools(doc, base_url="http://127.0.0.1:9")
    assert str(caught.value).startswith(
        "OpenAPI operation 'listTickets' sends the query parameter 'filter' in style 'matrix'"
    )


def test_a_path_variable_no_parameter_declares_is_refused_at_load():
    doc = {"openapi": "3.1.0", "paths": {"/pets/{petId}": {"delete": {"operationId": "deletePet"}}}}
    with pytest.raises(GraphConfigError) as caught:
        openapi_tools(doc, base_url="http://127.0.0.1:9")
    assert str(caught.value) == (
        "OpenAPI operation 'deletePet' (DELETE /pets/{petId}) has the path variable {petId}, "
        "which no parameter declares; declare it (name: petId, in: path, required: true, "
        "with a schema), or leave the operation out with operations=[...]."
    )
