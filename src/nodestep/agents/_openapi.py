"""Tools made from an OpenAPI document: each operation a tool the model may call over HTTP.

``openapi_tools(spec, base_url=..., role=...)`` reads the document's operations. Each one
becomes a ``Tool`` whose arguments (the path and query parameters, and ``body`` for a
JSON request body) are validated against the document's schemas and shown to the model
as one JSON schema. A call sends the request with ``httpx`` (``pip install
'nodestep[openapi]'``).

The authentication header never comes from the document, the state or the model: at call
time the tool asks the tool node's context for the credentials of its ``role``
(``ctx.credentials(role)``), which the run's ``CredentialsProvider`` resolves. The tool
node declares its tools' roles for them. The header is put where the operation's security
scheme says (``Authorization: Bearer``, ``Basic``, or an ``apiKey`` header or query
parameter); a provider that returns a dict gives the headers themselves. The secret is in
the request only: never in the tool's arguments, its result or its error, so never in
the history. A 4xx or 5xx answer raises ``OpenAPICallError``, which the tool node turns
into an error tool message for the model.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import orjson
from pydantic import ConfigDict, PydanticUserError, create_model

from nodestep._display.text import short_repr
from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import NodeContext
from nodestep.agents._openapi_auth import Auth, auth_of
from nodestep.agents._openapi_document import load_document
from nodestep.agents._openapi_schema import SchemaReader, field_name
from nodestep.agents._openapi_send import (
    Answer,
    call_error,
    check_path,
    fill_path,
    is_json_media,
    send,
    target_of,
)
from nodestep.agents._openapi_style import Param, param_of, path_text, query_pairs
from nodestep.agents._tools import Tool
from nodestep.agents._workspace.handle import Workspace

__all__ = ["OpenAPITool", "openapi_tools"]

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_SHOWN = 500  # characters of an error answer the model is shown
MAX_ANSWER_BYTES = 2_000_000
"""How many bytes of an answer a tool reads by default; the rest is cut, with a note."""
# What a document of a shape OpenAPI does not allow raises deep in the reading of it.
_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError, PydanticUserError)
_TEMPLATE_VARIABLE = re.compile(r"{([^{}]*)}")


def _load_httpx() -> Any:
    try:
        return importlib.import_module("httpx")
    except ImportError:
        raise GraphConfigError(
            "openapi_tools needs the httpx package, which is not installed. Install the "
            "extra: pip install 'nodestep[openapi]'"
        ) from None


def _tool_name(operation: Mapping[str, Any], method: str, path: str) -> str:
    given = operation.get("operationId")
    if given is not None and not isinstance(given, str):
        raise GraphConfigError(
            f"OpenAPI operation {method.upper()} {path} has the operationId {given!r}; an "
            f"operationId is a string. Fix the document."
        )
    raw = given or f"{method}_{path.strip('/')}"
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(raw))
    return name.strip("_")[:64] or method


def _walk(document: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any], list[Any]]]:
    """Yield each operation as (method, path, operation, the path item's parameters)."""
    for path, item in document["paths"].items():
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") or []
        if not isinstance(shared, list):
            raise GraphConfigError(
                f"OpenAPI path {path!r} has parameters {shared!r}; parameters are a list. "
                f"Fix the document."
            )
        for method in _METHODS:
            operation = item.get(method)
            if isinstance(operation, Mapping):
                yield method, str(path), operation, shared


class OpenAPITool(Tool):
    """One operation of an OpenAPI document, as a tool; made by ``openapi_tools``.

    Attributes:
        method: The HTTP method, upper case.
        path: The path template, e.g. ``/pets/{petId}``.
        role: The role whose credentials authenticate the call, or ``None``.
        max_answer_bytes: How many bytes of an answer are read; a longer one is cut and
            the model told so.
        prefix: What an ``Agent`` names its ToolNode with: ``<prefix>__<operationId>``.
    """

    prefix: str = "OpenAPI"

    def __init__(
        self,
        document: Mapping[str, Any],
        reader: SchemaReader,
        where: tuple[str, str, Mapping[str, Any], list[Any]],
        *,
        base_url: str,
        role: str | None,
        client: Any,
        timeout: float,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        # Tool.__init__ reads a Python signature; here the arguments come from the
        # document, so the same attributes are set from it.
        method, path, operation, shared = where
        self.name = _tool_name(operation, method, path)
        path = check_path(path, f"operation {self.name!r}")
        self.method, self.path, self.role = method.upper(), path, role
        self.max_answer_bytes = max_answer_bytes
        self.roles = (role,) if role else ()
        summary = operation.get("summary") or operation.get("description")
        self.description = str(summary or f"{self.method} {path}").strip()
        self.approve, self.is_async, self.fn = False, True, self.ainvoke
        self._target = target_of(_load_httpx(), base_url)
        self._client, self._timeout = client, timeout
        self._auth: Auth = auth_of(document, operation, self.name)
        self._places: dict[str, Param] = {}  # field -> where the argument goes, and how
        self._body_type = "application/json"  # the request body's media type, as declared
        self.args_model = self._model(reader, operation, shared)
        self._check_template()
        self._schema = self.args_model.model_json_schema(by_alias=True)
        self._schema.pop("title", None)

    def _model(self, reader: SchemaReader, operation: Mapping[str, Any], shared: list[Any]) -> Any:
        where = f"operation {self.name!r}"
        own = operation.get("parameters") or []
        if not isinstance(own, list):
            raise GraphConfigError(
                f"OpenAPI {where} has parameters {own!r}; parameters are a list. Fix the document."
            )
        params = {}
        for raw in [*shared, *own]:
            found = reader.resolve(raw, where)
            if not isinstance(found, Mapping):
                raise GraphConfigError(
                    f"OpenAPI {where} has a parameter {found!r}; fix the document."
                )
            _check_param(found, where)
            params[(found.get("in"), found.get("name"))] = found  # the operation's win
        fields: dict[str, Any] = {}
        for (place, name), param in params.items():
            if place not in ("path", "query"):
                if param.get("required"):
                    raise GraphConfigError(
                        f"OpenAPI {where} needs the {place} parameter {name!r}, and tools "
                        f"send path and query parameters and a JSON body only. Leave the "
                        f"operation out with operations=[...]."
                    )
                continue
            key = field_name(str(name))
            if key in self._places:
                raise GraphConfigError(
                    f"OpenAPI {where} has two parameters named like {name!r} "
                    f"({self._places[key].name!r} too); tools name arguments by parameter. "
                    f"Leave the operation out with operations=[...]."
                )
            self._places[key] = param_of(param, place, str(name), where)
            required = place == "path" or bool(param.get("required"))
            schema = {**param.get("schema", {}), "description": param.get("description")}
            fields[key] = reader.field(schema, str(name), required, where)
        body = reader.resolve(operation.get("requestBody"), where)
        if isinstance(body, Mapping):
            schema = self._body_schema(body.get("content"))
            if schema is None and body.get("required"):
                raise GraphConfigError(
                    f"OpenAPI {where} takes a request body that is not JSON; tools send "
                    f"application/json only. Leave it out with operations=[...]."
                )
            if schema is not None:
                if "body" in fields:
                    raise GraphConfigError(
                        f"OpenAPI {where} has a parameter named 'body' and a JSON body; "
                        f"tools pass the body as 'body'. Leave it out with operations=[...]."
                    )
                fields["body"] = reader.field(schema, "body", bool(body.get("required")), where)
        config = ConfigDict(extra="forbid", populate_by_name=True)
        return create_model(f"{self.name}_args", __config__=config, **fields)

    def _body_schema(self, content: Any) -> Any:
        """Return the schema of the JSON request body in ``content``, or ``None``.

        Any JSON media type is one: ``application/json`` (preferred), with parameters
        (``application/json;charset=UTF-8``) or a ``+json`` suffix
        (``application/vnd.api+json``), which is then the request's Content-Type.
        """
        if not isinstance(content, Mapping):
            return None
        found = [k for k in content if isinstance(k, str) and is_json_media(k)]
        if not found:
            return None
        found.sort(key=lambda k: k.split(";")[0].strip().lower() != "application/json")
        self._body_type = found[0]
        media = content[found[0]]
        return media.get("schema") if isinstance(media, Mapping) else None

    def _check_template(self) -> None:
        """Refuse a path variable no parameter declares: it would be sent as ``{petId}``."""
        declared = {p.name for p in self._places.values() if p.place == "path"}
        for variable in _TEMPLATE_VARIABLE.findall(self.path):
            if variable not in declared:
                raise GraphConfigError(
                    f"OpenAPI operation {self.name!r} ({self.method} {self.path}) has the "
                    f"path variable {{{variable}}}, which no parameter declares; declare "
                    f"it (name: {variable}, in: path, required: true, with a schema), or "
                    f"leave the operation out with operations=[...]."
                )

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Return ``args`` checked against the operation's schemas, in their JSON form.

        Names are the document's (``first-name``, ``_id``), nested ones too: the request
        is sent with them, never with the Python names of the fields (``first_name``).

        Raises:
            pydantic.ValidationError: an argument is missing, unknown or of the wrong type.
        """
        checked = self.args_model.model_validate(args)
        return dict(checked.model_dump(mode="json", by_alias=True, exclude_unset=True))

    async def ainvoke(
        self,
        args: dict[str, Any],
        *,
        inline: bool = False,
        ctx: NodeContext | None = None,
        state: Any = None,
        call_id: str = "",
        workspace: Workspace | None = None,
    ) -> Any:
        """Validate ``args``, send the request, and return the answer (JSON, or text).

        Args:
            args: The arguments, as the model wrote them.
            inline: Unused: a request never blocks the event loop.
            ctx: The tool node's context, which gives the role's credentials.
            state: Unused: an operation's arguments all come from the model.
            call_id: Unused, as ``state``.
            workspace: Unused: an operation has no ``Workspace`` parameter.

        Raises:
            pydantic.ValidationError: the arguments do not fit the operation's schemas.
            CredentialsError: the run's provider cannot give the role's credentials.
            OpenAPICallError: the server answered 4xx/5xx, or could not be reached.
        """
        values = self.validate(args)
        pairs: list[tuple[str, str]] = []
        body = values.pop("body", None)
        in_path: dict[str, Any] = {}
        for key, value in values.items():
            param = self._places[field_name(key)]
            if param.place == "path":
                in_path[param.name] = path_text(param, value)
            elif value is not None:
                pairs += query_pairs(param, value)
        path = fill_path(self.path, in_path, self.name)
        headers: dict[str, str] = {}
        query: dict[str, Any] = {}  # the credentials' query parameter, if any
        secrets: list[str] = []
        if self.role is not None:
            if ctx is None:
                raise GraphConfigError(
                    f"Tool {self.name!r} acts in role {self.role!r} and needs the node's "
                    f"context to get its credentials: run it in a tool_node, or pass ctx=."
                )
            secrets = self._auth.apply(ctx.credentials(self.role).secret(), headers, query)
        return await self._send(path, [*pairs, *query.items()], body, headers, secrets)

    async def _send(
        self,
        path: str,
        query: list[tuple[str, Any]],
        body: Any,
        headers: dict[str, str],
        secrets: list[str],
    ) -> Any:
        sent: dict[str, Any] = {"params": query, "headers": headers}
        if body is not None:
            sent["json"] = body
            # The document's media type (application/vnd.api+json...), which a server may
            # insist on; credentials given as headers may set their own.
            if not any(k.lower() == "content-type" for k in headers):
                headers["Content-Type"] = self._body_type
        what = f"{self.name} ({self.method} {self.path})"
        answer = await send(
            _load_httpx(), self._client, self._target, (what, self.method, path), sent,
            timeout=self._timeout, cap=self.max_answer_bytes, secrets=secrets,
        )  # fmt: skip
        if 300 <= answer.status < 400:
            to = f" to {answer.location}" if answer.location else ""
            raise call_error(
                f"{what} answered HTTP {answer.status} {answer.reason}, a redirect{to}; "
                f"tools follow no redirect, so that the credentials go to the base URL "
                f"only. If the API has moved, set openapi_tools(base_url=...) to where it "
                f"is now.",
                answer.status,
            )
        if answer.status >= 400:
            raise call_error(
                f"{what} answered HTTP {answer.status} {answer.reason}: {answer.text[:_SHOWN]}",
                answer.status,
            )
        if answer.cut is not None:
            return answer.text + "\n" + _cut_note(answer, self.max_answer_bytes)
        if answer.json and answer.text:
            try:
                return orjson.loads(answer.text)
            except orjson.JSONDecodeError:
                return answer.text
        return answer.text or f"HTTP {answer.status} {answer.reason}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"OpenAPI tool {self.name!r} sends a request: await tool.ainvoke(args, ctx=ctx) "
            f"or run it in a tool_node, rather than calling it."
        )


def _cut_note(answer: Answer, cap: int) -> str:
    of = f" of {answer.cut:,}" if answer.cut is not None and answer.cut > 0 else ""
    return (
        f"[nodestep: the answer was cut at {cap:,} bytes{of}; ask for less, e.g. a smaller "
        f"page or a narrower query]"
    )


def openapi_tools(
    spec: Mapping[str, Any] | str | os.PathLike[str],
    *,
    base_url: str,
    role: str | None = None,
    operations: Sequence[str] | None = None,
    client: Any = None,
    timeout: float = 30.0,
    approve: bool | Collection[str] = False,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
    prefix: str = "OpenAPI",
) -> list[Tool]:
    """Make a tool of each operation of an OpenAPI 3 document.

    Credentials go to ``base_url`` only (see ``nodestep.agents._openapi_send``).

    Args:
        spec: The document: a dict, or the path of a ``.json`` or ``.yaml`` file.
        base_url: Where the API is served, e.g. ``"https://api.example.com/v1"``; the
            operation's path is appended. The document's ``servers`` are not used, so
            the same document serves a test server and the real one.
        role: The role whose credentials authenticate every call, resolved by the run's
            ``CredentialsProvider`` (``invoke(..., credentials=provider)``); ``None``
            sends no credentials.
        operations: The ``operationId``\\s (tool names) to make tools of, in this order;
            ``None`` makes all of them.
        client: An ``httpx.AsyncClient`` to send with (its pool, proxies and transport);
            ``None`` opens one per call with ``timeout``.
        timeout: Seconds a request may take, when ``client`` is ``None``.
        approve: Make calls wait for a person's approval (see ``tool_node``): ``True``
            for every operation, or the names of those that must wait.
        max_answer_bytes: How many bytes of an answer are read (streaming); a longer
            answer is cut there, and the tool message says so to the model.
        prefix: How an ``Agent`` from a specs folder names these tools' ToolNodes:
            ``<prefix>__<operationId>`` (``OpenAPI__getUser`` by default). Two APIs with
            an operationId in common go into one agent under two prefixes, as Liman's
            ``create_tool_nodes(..., prefix=...)`` does.

    Returns:
        The tools, for ``tool_node``, ``model_node`` or ``create_react_agent``.

    Raises:
        GraphConfigError: httpx is not installed, the document cannot be read or has a
            value of a shape OpenAPI does not allow, an operation cannot be called with
            path, query and JSON body arguments, two operations have one name, an
            unknown name in ``operations``, a bad ``role``, ``base_url``,
            ``max_answer_bytes`` or ``prefix``.
    """
    target_of(_load_httpx(), base_url)
    document = load_document(spec)
    reader = SchemaReader(document)
    _check_options(role, max_answer_bytes, prefix)
    options = {"base_url": base_url, "role": role, "client": client, "timeout": timeout}
    wanted = None if operations is None else set(operations)
    made = _made(document, reader, wanted, {**options, "max_answer_bytes": max_answer_bytes})
    _mark_approval(made, approve)
    for tool in made.values():
        tool.prefix = prefix
    return _chosen(document, made, operations)


def _chosen(
    document: Mapping[str, Any], made: dict[str, OpenAPITool], operations: Sequence[str] | None
) -> list[Tool]:
    """Return the tools ``operations`` names, in its order; every tool for ``None``."""
    if operations is None:
        return list(made.values())
    unknown = [name for name in operations if name not in made]
    if unknown:
        raise GraphConfigError(
            f"openapi_tools: the document has no operation {', '.join(map(repr, unknown))}; "
            f"its operations are {', '.join(map(repr, _names(document))) or 'none'}."
        )
    return [made[name] for name in operations]


def _check_options(role: Any, max_answer_bytes: Any, prefix: Any) -> None:
    if role is not None and (not isinstance(role, str) or not role):
        raise GraphConfigError(f"openapi_tools got role={role!r}; pass a role name, e.g. 'crm'.")
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise GraphConfigError(
            f"openapi_tools got prefix={prefix!r}; pass letters, digits, '_' or '-' (a model "
            f"takes only those in a tool's name), e.g. prefix='Users'."
        )
    if isinstance(max_answer_bytes, bool) or not (
        isinstance(max_answer_bytes, int) and max_answer_bytes > 0
    ):
        raise GraphConfigError(
            f"openapi_tools got max_answer_bytes={max_answer_bytes!r}; pass a number of "
            f"bytes of at least 1 (the default is {MAX_ANSWER_BYTES:,})."
        )


_PREFIX = re.compile(r"^[A-Za-z0-9_-]+$")


def _made(
    document: Mapping[str, Any],
    reader: SchemaReader,
    wanted: set[str] | None,
    options: dict[str, Any],
) -> dict[str, OpenAPITool]:
    """Make the tools of the operations ``wanted`` (all for ``None``), by name."""
    made: dict[str, OpenAPITool] = {}
    seen: dict[str, str] = {}
    for where in _walk(document):
        name = _tool_name(where[2], where[0], where[1])
        if wanted is not None and name not in wanted:
            continue
        at = f"{where[0].upper()} {where[1]}"
        if name in seen:  # one would silently replace the other
            raise GraphConfigError(
                f"OpenAPI operations {seen[name]} and {at} are both named {name!r} (by "
                f"operationId, or by method and path); tool names must differ. Give them "
                f"different operationIds."
            )
        seen[name] = at
        made[name] = _tool(document, reader, where, name, options)
    return made


def _tool(
    document: Mapping[str, Any],
    reader: SchemaReader,
    where: tuple[str, str, Mapping[str, Any], list[Any]],
    name: str,
    options: dict[str, Any],
) -> OpenAPITool:
    """Make one operation's tool; a document of a shape OpenAPI does not allow is our error."""
    try:
        return OpenAPITool(document, reader, where, **options)
    except GraphConfigError:
        raise
    except _SHAPE_ERRORS as error:
        problem = type(error).__name__
    except RecursionError:
        problem = "it nests too deeply"
    raise GraphConfigError(
        f"OpenAPI operation {name!r} ({where[0].upper()} {where[1]}) cannot be read: the "
        f"document has a value of a shape OpenAPI 3 does not allow there ({problem}). "
        f"Check it against the OpenAPI 3 schema, or leave the operation out with "
        f"operations=[...]."
    )


def _mark_approval(made: dict[str, OpenAPITool], approve: bool | Collection[str]) -> None:
    if isinstance(approve, bool):
        for item in made.values():
            item.approve = approve
        return
    if isinstance(approve, str) or not all(name in made for name in approve):
        raise GraphConfigError(
            f"openapi_tools got approve={approve!r}; pass True, False, or a list of the "
            f"operations' names that must wait for approval: {', '.join(made)}."
        )
    for name in approve:
        made[name].approve = True


def _names(document: Mapping[str, Any]) -> list[str]:
    return [_tool_name(op, method, path) for method, path, op, _ in _walk(document)]


_PLACES = ("path", "query", "header", "cookie")


def _check_param(param: Mapping[str, Any], where: str) -> None:
    """Refuse a parameter without a name or place: it would become an argument named
    'None', or be dropped without a word, and the call would go out without it.

    Raises:
        GraphConfigError: naming the parameter and the fix.
    """
    name, place = param.get("name"), param.get("in")
    if not isinstance(name, str) or not name:
        raise GraphConfigError(
            f"OpenAPI {where} has a parameter whose 'name' is {name!r} "
            f"({short_repr(dict(param))}); a parameter's 'name' is a non-empty string. Fix "
            f"the document, or leave the operation out with operations=[...]."
        )
    if place not in _PLACES:
        swagger = (
            " ('body' and 'formData' are Swagger 2's; convert the document to OpenAPI 3)"
            if place in ("body", "formData")
            else ""
        )
        raise GraphConfigError(
            f"OpenAPI {where} has the parameter {name!r} in {place!r}; a parameter's 'in' "
            f"is one of {', '.join(_PLACES)}{swagger}. Fix the document, or leave the "
            f"operation out with operations=[...]."
        )
