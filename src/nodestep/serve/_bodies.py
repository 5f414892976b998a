"""Request bodies: JSON read within limits, checked by models, refused as ``{"detail"}``.

Every refusal is an ``ApiError`` with the HTTP status the reference server answers and a
detail that names the field and what it takes; the app turns it into a JSON response, so a
bad request never reaches a handler half-checked and never becomes a 500.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from nodestep import NodestepError

__all__ = [
    "ApiError",
    "AssistantSearch",
    "HistoryQuery",
    "RunCreate",
    "StateUpdate",
    "StoreDelete",
    "StoreNamespaces",
    "StorePut",
    "StoreSearch",
    "Superstep",
    "SuperstepUpdate",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadSearch",
    "ThreadTTL",
    "check_depth",
    "parse",
    "read_json",
    "thread_uuid",
]

M = TypeVar("M", bound=BaseModel)


class ApiError(NodestepError, ValueError):
    """A request the server refuses: an HTTP status and the ``detail`` it answers with.

    Attributes:
        status: The HTTP status code.
        detail: What was wrong and how to fix it, as the ``detail`` of the JSON answer.
    """

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail

    def __reduce__(self) -> Any:
        return (type(self), (self.status, self.detail))


def check_depth(value: Any, limit: int) -> None:
    """Refuse JSON nested deeper than ``limit`` levels, without recursion.

    Raises:
        ApiError: 422 naming the limit.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise ApiError(
                    422, f"The JSON body is nested deeper than {limit} levels; send flatter data."
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


async def read_json(request: Request, depth_limit: int) -> Any:
    """Return the request's JSON body (``{}`` when empty), checked for its nesting depth.

    The body's size is limited before it gets here, by the security middleware.

    Raises:
        ApiError: 422 for a body that is not JSON or nests too deep.
    """
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise ApiError(422, f"The body is not valid JSON: {error}.") from None
    check_depth(data, depth_limit)
    return data


def parse(model: type[M], data: Any) -> M:
    """Return ``data`` checked by ``model``.

    Raises:
        ApiError: 422 with pydantic's list of errors, each naming its field.
    """
    if not isinstance(data, dict):
        raise ApiError(422, f"The body must be a JSON object, got {type(data).__name__}.")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ApiError(
            422, error.errors(include_url=False, include_context=False, include_input=False)
        ) from None


def thread_uuid(thread_id: str, status: int = 422) -> str:
    """Return a thread id in its canonical form.

    Raises:
        ApiError: the id is not a UUID (``status``: 422, or 400 where the reference says).
    """
    try:
        return str(uuid.UUID(thread_id))
    except ValueError:
        raise ApiError(
            status, f"Thread id {thread_id!r} is not a UUID; thread ids are UUIDs."
        ) from None


def check_select(select: Iterable[str], fields: Sequence[str], what: str) -> None:
    """Refuse a ``select`` that names a field ``what`` (``"a run"``, say) does not have.

    Raises:
        ApiError: 422 naming the first such field and the fields there are.
    """
    unknown = [name for name in select if name not in fields]
    if unknown:
        raise ApiError(
            422,
            f"select names {unknown[0]!r}, which is not a field of {what}; "
            f"the fields are: {', '.join(fields)}.",
        )


def query_count(request: Request, name: str, default: int) -> int:
    """Return the query parameter ``name`` as a count (``default`` when it is absent).

    Why refuse a negative one: it would reach a slice, where ``-1`` silently means "all
    but the last".

    Raises:
        ApiError: 422, a value that is not a whole number of 0 or more.
    """
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ApiError(
            422, f"{name}={text!r} is not a whole number of 0 or more; send e.g. {name}={default}."
        )
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SuperstepUpdate(_Body):
    """One edit of a superstep of ``POST /threads``: values written as node ``as_node``."""

    values: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    as_node: str | None = None


class Superstep(_Body):
    """A superstep of ``POST /threads``: the edits that make a new thread's history."""

    updates: list[SuperstepUpdate] = []


class ThreadTTL(_Body):
    """A thread's ``ttl``: the minutes it is kept from now, and what goes after them."""

    ttl: float
    strategy: Literal["delete", "keep_latest"] = "delete"


class ThreadCreate(_Body):
    """The body of ``POST /threads``; ``ttl`` as the SDKs send it, or a number of minutes."""

    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    supersteps: list[Superstep] | None = None
    ttl: ThreadTTL | float | None = None


class ThreadPatch(_Body):
    """The body of ``PATCH /threads/{id}``."""

    metadata: dict[str, Any] | None = None
    ttl: ThreadTTL | float | None = None


class ThreadSearch(_Body):
    """The body of ``POST /threads/search``."""

    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    ids: list[str] | None = None
    select: list[str] | None = None
    limit: int = Field(default=10, ge=0)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    extract: dict[str, str] | None = None


class AssistantSearch(_Body):
    """The body of ``POST /assistants/search``."""

    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=0)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None


class StateUpdate(_Body):
    """The body of ``POST /threads/{id}/state``."""

    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None


class HistoryQuery(_Body):
    """The body of ``POST /threads/{id}/history``."""

    limit: int = Field(default=10, ge=0)
    before: dict[str, Any] | str | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None


class RunCreate(_Body):
    """The body of every run endpoint: what to run, and how to stream it."""

    assistant_id: str
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    stream_mode: list[str] | str = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "enqueue"
    if_not_exists: Literal["create", "reject"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: float | None = Field(default=None, ge=0)
    webhook: str | None = None  # refused: named so that it is not dropped unseen


class StorePut(_Body):
    """The body of ``PUT /store/items``; ``ttl`` in minutes, as LangGraph counts it."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    index: list[str] | bool | None = None
    ttl: float | None = None


class StoreDelete(_Body):
    """The body of ``DELETE /store/items``."""

    namespace: list[str] = []
    key: str


class StoreSearch(_Body):
    """The body of ``POST /store/items/search``."""

    namespace_prefix: list[str] | None = None
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    query: str | None = None
    refresh_ttl: bool | None = None


class StoreNamespaces(_Body):
    """The body of ``POST /store/namespaces``."""

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0
