"""OpenAPI tools under hostile input: arguments, documents, answers and secrets that try to
send a request elsewhere, leak a credential, or crash the loader with a raw exception."""

from __future__ import annotations

import copy
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from api_server import Raw, api_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodestep import Credentials, CredentialsError, GraphConfigError, OpenAPICallError
from nodestep.agents import openapi_tools

pytestmark = pytest.mark.anyio
SECRET = "k3y/+=&?#%Zq"  # characters a URL must percent-encode


def _doc(paths: dict[str, Any], scheme: dict[str, Any] | None = None) -> dict[str, Any]:
    scheme = scheme or {"type": "http", "scheme": "bearer"}
    return {
        "openapi": "3.1.0",
        "security": [{"auth": []}],
        "components": {"securitySchemes": {"auth": scheme}},
        "paths": paths,
    }


FILES = _doc(
    {
        "/files/{name}": {
            "get": {
                "operationId": "getFile",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
            }
        },
        "/files/{a}{b}": {
            "get": {
                "operationId": "getPair",
                "parameters": [
                    {"name": "a", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "b", "in": "path", "required": True, "schema": {"type": "string"}},
                ],
            }
        },
        "/big": {"get": {"operationId": "getBig"}},
        "/pets": {"get": {"operationId": "listPets"}},
    }
)
QUERY_KEY = {"type": "apiKey", "in": "query", "name": "api_key"}


class _Ctx:
    def __init__(self, secret: Any) -> None:
        self.secret = secret

    def credentials(self, role: str) -> Credentials:
        return Credentials(role, self.secret)


def _tools(doc: dict[str, Any], url: str, **options: Any) -> dict[str, Any]:
    return {t.name: t for t in openapi_tools(doc, base_url=url, role="r", **options)}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("getFile", {"name": ".."}),
        ("getFile", {"name": "."}),
        ("getFile", {"name": ""}),
        ("getPair", {"a": ".", "b": "."}),
    ],
)
async def test_a_path_argument_that_would_leave_the_operations_path_is_refused(
    tool: str, args: dict[str, str]
) -> None:
    refused = pytest.raises(OpenAPICallError, match="would leave the operation's path")
    with api_server() as server, refused as caught:
        await _tools(FILES, server.url)[tool].ainvoke(args, ctx=_Ctx(SECRET))
    assert server.requests == []  # nothing sent, so no token went anywhere
    assert caught.value.status is None


async def test_dots_inside_a_path_argument_stay_in_its_segment() -> None:
    with api_server() as server:
        server.answers["GET /api/files/..%2Fetc"] = [(200, {"ok": 1})]
        server.answers["GET /api/files/a..b"] = [(200, {"ok": 2})]
        tools = _tools(FILES, server.url)
        assert await tools["getFile"].ainvoke({"name": "../etc"}, ctx=_Ctx(SECRET)) == {"ok": 1}
        assert await tools["getFile"].ainvoke({"name": "a..b"}, ctx=_Ctx(SECRET)) == {"ok": 2}


@pytest.mark.parametrize("path", ["@127.0.0.1:9/x", "x/y", "/a/../b", "/a/./b", "/a?b=1", "/a#b"])
def test_a_document_path_that_is_not_a_plain_absolute_path_is_refused_at_load(path: str) -> None:
    doc = _doc({path: {"get": {"operationId": "op"}}})
    with pytest.raises(GraphConfigError, match=re.escape(f"path {path!r}")):
        openapi_tools(doc, base_url="http://127.0.0.1:9")


async def test_a_request_that_would_leave_the_base_urls_origin_is_refused_keeping_the_key() -> None:
    with api_server() as home, api_server() as elsewhere:
        port = elsewhere.url.split(":")[2].split("/")[0]
        doc = _doc({"/x": {"get": {"operationId": "op"}}}, {**QUERY_KEY, "in": "header"})
        (tool,) = openapi_tools(doc, base_url=home.url.removesuffix("/api"), role="r")
        tool.path = f"@127.0.0.1:{port}/x"  # as a document's path that slipped past the load
        with pytest.raises(OpenAPICallError, match="not to the base URL's origin"):
            await tool.ainvoke({}, ctx=_Ctx(SECRET))
    assert elsewhere.requests == [] and home.requests == []


@pytest.mark.parametrize("base_url", ["127.0.0.1:9", "ftp://h/x", "http://", "http://h/x?q=1"])
def test_a_base_url_that_is_not_an_http_origin_and_path_is_refused(base_url: str) -> None:
    with pytest.raises(GraphConfigError, match="base_url"):
        openapi_tools(FILES, base_url=base_url)


async def test_an_api_key_in_the_query_never_reaches_the_httpx_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    doc = _doc({"/pets": {"get": {"operationId": "listPets"}}}, QUERY_KEY)
    with api_server() as server:
        server.answers["GET /api/pets"] = [(200, [])]
        await _tools(doc, server.url)["listPets"].ainvoke({}, ctx=_Ctx(SECRET))
    assert server.requests[0]["query"] == {"api_key": SECRET}
    logged = [r for r in caplog.records if r.name == "httpx"]
    assert logged and "api_key=[redacted]" in logged[0].getMessage()
    assert "k3y" not in caplog.text


@pytest.mark.parametrize(
    ("secret", "scheme"),
    [
        ("tökén-Zq", None),
        ({"X-Token": "ключ-Zq"}, None),
        ("line\r\nX-Evil: Zq", None),
        ("tökén-Zq", {"type": "apiKey", "in": "header", "name": "X-Key"}),
    ],
)
async def test_a_secret_a_header_cannot_carry_is_a_credentials_error_naming_no_character(
    secret: Any, scheme: dict[str, Any] | None
) -> None:
    doc = _doc({"/pets": {"get": {"operationId": "listPets"}}}, scheme)
    with api_server() as server, pytest.raises(CredentialsError, match="cannot carry") as caught:
        await _tools(doc, server.url)["listPets"].ainvoke({}, ctx=_Ctx(secret))
    assert server.requests == []
    text = str(caught.value)
    for ch in "öéключ\r":
        assert ch not in text
    assert "Zq" not in text and "position" not in text
    assert caught.value.__context__ is None and caught.value.__cause__ is None


async def test_a_non_ascii_api_key_in_the_query_is_sent_percent_encoded() -> None:
    doc = _doc({"/pets": {"get": {"operationId": "listPets"}}}, QUERY_KEY)
    with api_server() as server:
        server.answers["GET /api/pets"] = [(200, [])]
        await _tools(doc, server.url)["listPets"].ainvoke({}, ctx=_Ctx("tökén"))
    assert server.requests[0]["query"] == {"api_key": "tökén"}


def test_two_operations_with_one_operation_id_are_refused_naming_both() -> None:
    doc = _doc(
        {
            "/a": {"get": {"operationId": "same"}},
            "/b": {"post": {"operationId": "same"}},
        }
    )
    with pytest.raises(GraphConfigError, match=r"GET /a and POST /b are both named 'same'"):
        openapi_tools(doc, base_url="http://127.0.0.1:9")
    with pytest.raises(GraphConfigError, match=r"GET /a and POST /b are both named 'same'"):
        openapi_tools(doc, base_url="http://127.0.0.1:9", operations=["same"])


# httpx's byte streams are nested async generators, and closing the outer one leaves the
# inner ones to the garbage collector, which trio reports (encode/httpx#3686); the
# connection itself is closed when the stream's block ends.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.slow
async def test_an_answer_over_the_cap_is_read_streaming_and_cut_with_a_note() -> None:
    chunk = b"x" * 65_536
    with api_server() as server:
        server.streams["GET /api/big"] = (chunk, 1_500)  # 98 MB if read whole
        tool = _tools(FILES, server.url, max_answer_bytes=200_000)["getBig"]
        answer = await tool.ainvoke({}, ctx=_Ctx(SECRET))
    body, _, note = answer.rpartition("\n")
    assert body == "x" * 200_000
    assert "cut at 200,000 bytes" in note and "ask for less" in note
    assert server.sent < 50_000_000  # the server stopped soon after the client hung up


async def test_the_answer_cap_defaults_to_a_few_megabytes_and_must_be_positive() -> None:
    (tool, *_) = openapi_tools(FILES, base_url="http://127.0.0.1:9")
    assert tool.max_answer_bytes == 2_000_000
    with pytest.raises(GraphConfigError, match="max_answer_bytes"):
        openapi_tools(FILES, base_url="http://127.0.0.1:9", max_answer_bytes=0)


async def test_an_answer_under_the_cap_is_read_whole() -> None:
    with api_server() as server:
        server.streams["GET /api/big"] = (b"y" * 1000, 5)
        answer = await _tools(FILES, server.url)["getBig"].ainvoke({}, ctx=_Ctx(SECRET))
    assert answer == "y" * 5000


# -- hostile documents: our error, never a raw TypeError / RecursionError / YAML error ---


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(
    "doc",
    [
        _doc({"/a": {"get": {"operationId": "a", "parameters": 5}}}),
        _doc({"/a": {"get": {"operationId": "a", "parameters": [{"in": "query", "schema": "x"}]}}}),
        _doc({"/a": {"get": {"operationId": {"x": 1}}}}),
        _doc({"/a": {"get": {"operationId": "a", "security": 5}}}),
        _doc({"/a": {"parameters": {"x": 1}, "get": {"operationId": "a"}}}),
        _doc({5: {"get": {"operationId": "a"}}}),
        _doc(
            {
                "/a": {
                    "post": {
                        "operationId": "a",
                        "requestBody": {
                            "content": {"application/json": {"schema": {"properties": ["x"]}}}
                        },
                    }
                }
            }
        ),
        _doc(
            {
                "/a": {
                    "post": {
                        "operationId": "a",
                        "requestBody": {"content": {"application/json": {"schema": _nested(5000)}}},
                    }
                }
            }
        ),
        _doc(
            {
                "/a": {
                    "get": {
                        "operationId": "a",
                        "parameters": [
                            {"name": "x", "in": "query", "schema": {"enum": [[1], {"a": 2}]}}
                        ],
                    }
                }
            }
        ),
        _doc(
            {
                "/a": {
                    "get": {
                        "operationId": "a",
                        "parameters": [
                            {"name": "x", "in": "query", "schema": {"type": ["string", {}]}}
                        ],
                    }
                }
            }
        ),
    ],
)
def test_a_hostile_document_is_a_config_error(doc: dict[str, Any]) -> None:
    with pytest.raises(GraphConfigError, match="OpenAPI"):
        openapi_tools(doc, base_url="http://127.0.0.1:9")


@pytest.mark.parametrize(
    "text",
    [
        "paths: !!python/object/apply:os.system ['true']\n",
        "paths: {a: " + "[" * 1000 + "]" * 1000 + "}\n",
        "paths: {a: b\n",
        "paths: &x [*x]\n",
    ],
)
def test_a_hostile_yaml_document_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "api.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GraphConfigError, match=r"api\.yaml"):
        openapi_tools(path, base_url="http://127.0.0.1:9")


@pytest.mark.slow
@pytest.mark.parametrize("limit", [1_000, 20_000])
def test_a_deep_yaml_document_is_refused_whatever_the_recursion_limit(
    tmp_path: Path, limit: int
) -> None:
    # Other code (a test runner, a library) may raise the limit, so that PyYAML's own
    # recursion no longer gives up: the document must be refused all the same.
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        path = tmp_path / "api.yaml"
        path.write_text("paths: {a: " + "[" * 1000 + "]" * 1000 + "}\n", encoding="utf-8")
        with pytest.raises(GraphConfigError, match=r"api\.yaml nests"):
            openapi_tools(path, base_url="http://127.0.0.1:9")
    finally:
        sys.setrecursionlimit(old)


def test_a_yaml_alias_inside_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "api.yaml"
    path.write_text("paths: {a: &x [1, *x]}\n", encoding="utf-8")
    with pytest.raises(GraphConfigError, match=r"api\.yaml.*inside itself"):
        openapi_tools(path, base_url="http://127.0.0.1:9")


def test_a_deeply_nested_json_document_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "api.json"
    path.write_text('{"paths": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    with pytest.raises(GraphConfigError, match=r"api\.json"):
        openapi_tools(path, base_url="http://127.0.0.1:9")


_KEYS = [
    "paths", "get", "post", "parameters", "requestBody", "content", "application/json",
    "schema", "type", "properties", "items", "required", "enum", "anyOf", "oneOf", "$ref",
    "name", "in", "operationId", "security", "components", "schemas", "securitySchemes",
    "nullable", "default", "additionalProperties", "title", "description", "scheme",
]  # fmt: skip
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(
        ["/a", "/a/{x}", "x", "query", "path", "header", "object", "string", "array",
         "integer", "null", "#/components/schemas/S", "#/paths", "apiKey", "http", ""]
    ),
)  # fmt: skip
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=25,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    paths=st.dictionaries(
        st.sampled_from(["/a", "/a/{x}", "/b"]),
        st.dictionaries(st.sampled_from(["get", "post", "parameters"]), _VALUES, max_size=2),
        max_size=2,
    ),
    components=_VALUES,
)
def test_random_documents_make_tools_or_raise_the_documented_error(
    paths: dict[str, Any], components: Any
) -> None:
    doc = {"openapi": "3.1.0", "paths": paths, "components": components}
    try:
        tools = openapi_tools(copy.deepcopy(doc), base_url="http://127.0.0.1:9")
    except GraphConfigError:
        return
    for tool in tools:
        json.dumps(tool.spec)


async def test_an_answer_echoing_the_percent_encoded_query_key_is_redacted() -> None:
    from urllib.parse import quote

    doc = _doc({"/pets": {"get": {"operationId": "listPets"}}}, QUERY_KEY)
    with api_server() as server:
        server.answers["GET /api/pets"] = [(200, {"echo": f"api_key={quote(SECRET, safe='')}"})]
        answer = await _tools(doc, server.url)["listPets"].ainvoke({}, ctx=_Ctx(SECRET))
    assert answer == {"echo": "api_key=[redacted]"}


def _chain_document(levels: int, *, cycle: bool) -> dict[str, Any]:
    """A request body whose schema S0 is anyOf [S1, S1], S1 anyOf [S2, S2], ... : each
    level doubles the parts a naive walk builds. With ``cycle``, the last level points back
    at S0, so no level's type is the same wherever it is entered."""
    schemas: dict[str, Any] = {
        f"S{i}": {"anyOf": [{"$ref": f"#/components/schemas/S{i + 1}"}] * 2} for i in range(levels)
    }
    schemas[f"S{levels}"] = (
        {"anyOf": [{"$ref": "#/components/schemas/S0"}, {"type": "string"}]}
        if cycle
        else {"type": "string"}
    )
    operation = {
        "operationId": "put_it",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {
                "type": "object",
                "properties": {"x": {"$ref": "#/components/schemas/S0"}},
                "required": ["x"],
            }}},
        },
    }  # fmt: skip
    document = _doc({"/it": {"post": operation}})
    document["components"]["schemas"] = schemas
    return document


@pytest.mark.slow
def test_a_reference_used_many_times_over_is_built_once() -> None:
    # 2**25 parts when each use is built again: a child process, so that a regression fails
    # on its timeout instead of hanging the suite.
    code = (
        "import json, sys\n"
        "from nodestep.agents import openapi_tools\n"
        "tools = openapi_tools(json.loads(sys.stdin.read()), base_url='http://127.0.0.1:9')\n"
        "print(tools[0].validate({'body': {'x': 'hello'}}))\n"
    )
    document = json.dumps(_chain_document(25, cycle=False))
    done = subprocess.run(
        [sys.executable, "-c", code], input=document, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout


def test_references_that_expand_without_end_are_a_config_error() -> None:
    with pytest.raises(GraphConfigError, match=r"expands to more than 10,000 parts"):
        openapi_tools(_chain_document(30, cycle=True), base_url="http://127.0.0.1:9")


def test_yaml_aliases_that_expand_without_end_are_a_config_error(tmp_path: Path) -> None:
    lines = ["s0: &s0 {type: string}"]
    lines += [f"s{i}: &s{i} {{anyOf: [*s{i - 1}, *s{i - 1}]}}" for i in range(1, 40)]
    path = tmp_path / "api.yaml"
    path.write_text(
        "x-parts:\n" + "".join(f"  {line}\n" for line in lines) + "openapi: 3.1.0\n"
        "paths:\n"
        "  /it:\n"
        "    get:\n"
        "      operationId: get_it\n"
        "      parameters:\n"
        "        - {name: q, in: query, required: true, schema: *s39}\n",
        encoding="utf-8",
    )
    with pytest.raises(GraphConfigError, match=r"expands to more than 10,000 parts"):
        openapi_tools(path, base_url="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("secret", "echo"),
    [
        ("eyJhbGciOi/Jz+Q9==", lambda text: text.replace("/", "\\/")),  # PHP's json_encode
        ("cl\u00e9-s3cret", lambda text: text),  # json.dumps writes \u00e9
        ("abc-s3cret-xyz", lambda text: text.replace("s", "\\u0073")),  # any char escaped
    ],
)
async def test_an_answer_echoing_the_secret_json_escaped_has_it_redacted(
    secret: str, echo: Any
) -> None:
    doc = _doc({"/debug": {"get": {"operationId": "debugEcho"}}}, QUERY_KEY)
    body = echo(json.dumps({"you_sent": f"api_key={secret}"}))
    with api_server() as server:
        server.answers["GET /api/debug"] = [(200, Raw(body.encode()))]
        server.answers["GET /api/fail"] = [(400, Raw(body.encode()))]
        tool = _tools(doc, server.url)["debugEcho"]
        answer = await tool.ainvoke({}, ctx=_Ctx(secret))
        tool.path = "/fail"
        with pytest.raises(OpenAPICallError) as caught:
            await tool.ainvoke({}, ctx=_Ctx(secret))
    assert answer == {"you_sent": "api_key=[redacted]"}
    assert "[redacted]" in str(caught.value)
    for shown in (json.dumps(answer), str(caught.value)):
        assert secret not in shown and secret not in json.loads(json.dumps(shown))


async def test_a_cut_json_answer_echoing_the_secret_escaped_has_it_redacted() -> None:
    doc = _doc({"/debug": {"get": {"operationId": "debugEcho"}}})
    escaped = SECRET.replace("/", "\\/")
    with api_server() as server:
        server.answers["GET /api/debug"] = [(200, Raw(f'{{"a": "Bearer {escaped}'.encode()))]
        tool = _tools(doc, server.url)["debugEcho"]
        answer = await tool.ainvoke({}, ctx=_Ctx(SECRET))
    assert answer == '{"a": "[redacted]'


async def test_a_redirect_is_not_followed_even_by_a_client_that_follows_them() -> None:
    import httpx

    doc = _doc({"/report": {"get": {"operationId": "getReport"}}}, {**QUERY_KEY, "in": "header"})
    with api_server() as home, api_server() as elsewhere:
        moved = Raw(headers={"Location": f"{elsewhere.url}/collect"})
        home.answers["GET /api/report"] = [(302, moved)]
        async with httpx.AsyncClient(follow_redirects=True) as client:
            tool = _tools(doc, home.url, client=client)["getReport"]
            with pytest.raises(OpenAPICallError) as caught:
                await tool.ainvoke({}, ctx=_Ctx(SECRET))
    assert elsewhere.requests == []
    assert caught.value.status == 302
    assert str(caught.value) == (
        f"getReport (GET /report) answered HTTP 302 Found, a redirect to "
        f"{elsewhere.url}/collect; tools follow no redirect, so that the credentials go to "
        f"the base URL only. If the API has moved, set openapi_tools(base_url=...) to where "
        f"it is now."
    )
