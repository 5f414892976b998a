"""The pages under ``/ui``: each a handler that reads, then renders one template.

The one value put on a page as markup is the graph's drawing: SVG that ``Graph.to_svg``
makes with every name escaped.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, unquote_to_bytes, urlencode

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from nodestep import NodestepError
from nodestep.sandbox._answers import questions, resume_answers
from nodestep.sandbox._chat import chat_page, send_message
from nodestep.sandbox._compare import diff_page, fork, provenance_page
from nodestep.sandbox._forms import FormError, form_fields, read_input
from nodestep.sandbox._reads import (
    PAGE,
    REGISTRY_THREAD,
    ApiRefusal,
    Sandbox,
    ServerRecordsThread,
    entry_nodes,
)
from nodestep.sandbox._render import (
    STREAM_MODES,
    read_form,
    render,
    run_and_show,
    sandbox_of,
    segment,
)
from nodestep.store import ThreadStatus

__all__ = ["pages_app"]

_HERE = Path(__file__).parent
_THREAD_STATUSES = ("idle", "busy", "interrupted", "error")


async def index(request: Request) -> Response:
    """The graphs served, each with its link."""
    sandbox = sandbox_of(request)
    rows = [(name, len(graph.schema.fields)) for name, graph in sorted(sandbox.graphs.items())]
    return render(request, "index.html", rows=rows)


async def graph_page(request: Request) -> Response:
    """A graph: its drawing, its state fields with reducers, and the new-run form."""
    sandbox = sandbox_of(request)
    name = request.path_params["name"]
    try:
        graph = sandbox.graph(name)
    except LookupError as e:
        return render(request, "error.html", 404, message=str(e))
    return render(
        request,
        "graph.html",
        name=name,
        svg=Markup(graph.to_svg()),  # trusted: to_svg escapes every name it draws
        fields=sandbox.fields(graph),
        form=form_fields(graph),
        error=None,
    )


def _metadata_filter(text: str) -> dict[str, str]:
    pairs = [part.partition("=") for part in text.split(",") if part.strip()]
    return {key.strip(): value.strip() for key, _, value in pairs}


async def threads_page(request: Request) -> Response:
    """The server's threads, a page at a time, filtered by status and metadata."""
    query = request.query_params
    status = query.get("status", "")
    meta = query.get("metadata", "")
    offset = max(0, int(query.get("offset", "0")))
    if status and status not in _THREAD_STATUSES:
        message = f"Unknown status {status!r}; use one of {', '.join(_THREAD_STATUSES)}."
        return render(request, "error.html", 400, message=message)
    rows = await sandbox_of(request).threads(
        status or None, _metadata_filter(meta), offset, PAGE + 1
    )
    keep = {"status": status, "metadata": meta}
    older = urlencode({**keep, "offset": offset + PAGE}) if len(rows) > PAGE else None
    newer = urlencode({**keep, "offset": max(0, offset - PAGE)}) if offset else None
    return render(
        request,
        "threads.html",
        rows=rows[:PAGE],
        status=status,
        metadata=meta,
        statuses=_THREAD_STATUSES,
        older=older,
        newer=newer,
    )


_STORE_STATUSES = ("completed", "paused", "unfinished")


async def store_threads_page(request: Request) -> Response:
    """Every thread of the store, the server's or not, a page at a time, by status."""
    store = sandbox_of(request).store
    status = request.query_params.get("status", "")
    cursor = request.query_params.get("cursor") or None
    if status and status not in _STORE_STATUSES:
        message = f"Unknown status {status!r}; use one of {', '.join(_STORE_STATUSES)}."
        return render(request, "error.html", 400, message=message)
    try:
        chosen = cast("ThreadStatus", status) if status else None  # checked just above
        page = await store.list_threads(status=chosen, limit=PAGE, cursor=cursor)
    except NotImplementedError as e:
        return render(request, "error.html", 501, message=str(e))
    except NodestepError as e:
        return render(request, "error.html", 400, message=str(e))
    more = urlencode({"status": status, "cursor": page.next_cursor}) if page.next_cursor else None
    return render(
        request,
        "store_threads.html",
        # The server's own records are no graph's thread (see ServerRecordsThread).
        rows=[t for t in page.threads if t.thread_id != REGISTRY_THREAD],
        status=status,
        statuses=_STORE_STATUSES,
        more=more,
    )


async def thread_page(request: Request) -> Response:
    """A thread: its timeline (paged), its branches as a tree, the state at an event."""
    sandbox = sandbox_of(request)
    thread_id = request.path_params["thread_id"]
    query = request.query_params
    shown = await sandbox.shown_branch(thread_id)
    branch = query.get("branch") or shown
    upto = query.get("upto")
    at = query.get("at") or None
    page = await sandbox.timeline(thread_id, branch, int(upto) if upto else None)
    tree = await sandbox.branches(thread_id)
    graph = await sandbox.graph_of(thread_id)
    try:
        state, pending = await sandbox.state_at(graph, thread_id, at, branch)
    except NodestepError as e:
        return render(request, "error.html", 404, message=str(e))
    return render(
        request,
        "thread.html",
        thread_id=thread_id,
        branch=branch,
        page=page,
        tree=tree,
        at=at,
        state=state,
        graph_name=graph.name,
        # The API resumes the branch it shows: the form is on that branch's page.
        questions=questions(pending) if at is None and branch == shown else [],
    )


async def resume(request: Request) -> Response:
    """Answer the thread's interrupts from the form; show the resumed run live."""
    form = await read_form(request)
    if isinstance(form, Response):
        return form
    sandbox = sandbox_of(request)
    thread_id = request.path_params["thread_id"]
    graph = await sandbox.graph_of(thread_id)
    shown = await sandbox.shown_branch(thread_id)
    _, pending = await sandbox.state_at(graph, thread_id, None, shown)
    try:
        answers = resume_answers(questions(pending), form)
    except FormError as e:
        return render(request, "error.html", 400, message=str(e))
    if not answers:
        message = f"Thread {thread_id!r} waits for no answer: nothing to resume."
        return render(request, "error.html", 409, message=message)
    body = {"assistant_id": graph.name, "command": {"resume": answers}, "stream_mode": STREAM_MODES}
    return await run_and_show(request, thread_id, body)


async def start_run(request: Request) -> Response:
    """Start a run of a graph from the new-run form; show it live."""
    form = await read_form(request)
    if isinstance(form, Response):
        return form
    sandbox = sandbox_of(request)
    name = request.path_params["name"]
    try:
        graph = sandbox.graph(name)
        values = read_input(graph, form)
    except (LookupError, FormError) as e:
        return render(request, "error.html", 400, message=str(e))
    thread_id = form.get("thread_id") or str(uuid.uuid4())
    meta = _metadata_filter(form.get("metadata", ""))
    thread = {"thread_id": thread_id, "if_exists": "do_nothing", "metadata": meta}
    try:
        await sandbox.call("POST", "/threads", thread)
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    body = {"assistant_id": name, "input": values, "stream_mode": STREAM_MODES}
    return await run_and_show(request, thread_id, body)


async def run_page(request: Request) -> Response:
    """A run as it happens: steps, tasks, custom events and tokens, from its stream."""
    sandbox = sandbox_of(request)
    thread_id = request.path_params["thread_id"]
    run_id = request.path_params["run_id"]
    api_run = f"/threads/{segment(thread_id)}/runs/{segment(run_id)}"
    try:
        run = await sandbox.call("GET", api_run)
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    graph = sandbox.graph(run["assistant_id"]) if run["assistant_id"] in sandbox.graphs else None
    graph = graph or await sandbox.graph_of(thread_id)
    return render(
        request,
        "run.html",
        thread_id=thread_id,
        run_id=run_id,
        graph_name=graph.name,
        svg=Markup(graph.to_svg()),  # trusted: to_svg escapes every name it draws
        stream=f"/ui/api{api_run}",
        # A run with input starts at the entry nodes; a resume or continuation elsewhere.
        entry=entry_nodes(graph) if (run.get("kwargs") or {}).get("input") is not None else [],
    )


def same_site_page(target: str) -> str:
    """Return ``target`` if it is a page of the sandbox (a path under ``/ui``), else ``/ui``.

    Why: the login form's ``next`` comes from the address, which anyone can write; going
    on to ``//evil.example`` or ``https://evil.example`` after the login would send the
    user to another site. A path that starts with ``/ui`` stays on this one.
    """
    if target == "/ui" or target.startswith(("/ui/", "/ui?")):
        return target
    return "/ui"


async def login_page(request: Request) -> Response:
    """The login form: the token once, then a cookie."""
    target = same_site_page(request.query_params.get("next", "/ui"))
    return render(request, "login.html", next=target, error="")


async def login(request: Request) -> Response:
    """Check the token; set the cookie and go on, or show the form again."""
    form = await read_form(request)
    if isinstance(form, Response):
        return form
    guard = request.app.state.guard
    target = same_site_page(form.get("next", "/ui"))
    if not guard.token_matches(form.get("token", "")):
        return render(request, "login.html", 401, next=target, error="That token is not right.")
    answer = RedirectResponse(target, status_code=303)
    name, value = guard.set_cookie()
    answer.raw_headers.append((name, value))
    return answer


async def _bad_number(request: Request, error: Exception) -> Response:
    message = f"A number in the address is not a number ({error}); fix the link."
    return render(request, "error.html", 400, message=message)


async def _server_records(request: Request, error: Exception) -> Response:
    return render(request, "error.html", 404, message=str(error))


def _raw_path(scope: Scope) -> str | None:
    """Return the request's path as it came, escapes kept, if it is the path routed."""
    raw = scope.get("raw_path")
    if not raw:
        return None
    text: str = raw.split(b"?", 1)[0].decode("latin-1")
    # Starlette retries a path without its trailing slash: that path has no raw form.
    return text if unquote(text) == scope["path"] else None


class _Route(Route):
    """A route whose parameters are read from the raw path: each one segment, unescaped.

    Why: the server decodes ``%2F`` in a path to ``/`` before routing, so a thread id
    ``shop/north/7`` (a script may name a thread so) would read as three segments. In the
    raw path its link's ``shop%2Fnorth%2F7`` is one segment, and decodes to the whole id;
    ``/ui/threads/ID/diff`` stays the diff of thread ``ID`` whatever the id holds.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = _raw_path(scope)
        if raw is None:
            return super().matches(scope)
        match, child = super().matches({**scope, "path": raw})
        if match is not Match.NONE:
            params: dict[str, Any] = child["path_params"]
            child["path_params"] = {
                key: unquote_to_bytes(value).decode("utf-8", "replace")
                if isinstance(value, str)
                else value
                for key, value in params.items()
            }
        return match, child


def pages_app(sandbox: Sandbox) -> Starlette:
    """Return the Starlette app of the pages, with ``sandbox`` on its state.

    The caller puts the ``Guard`` in front of it on ``app.state.guard`` too: the login
    form checks the token and sets the cookie through it.
    """
    app = Starlette(
        routes=[
            _Route("/ui", index),
            _Route("/ui/", index),
            _Route("/ui/login", login_page, methods=["GET"]),
            _Route("/ui/login", login, methods=["POST"]),
            _Route("/ui/graphs/{name}", graph_page),
            _Route("/ui/graphs/{name}/runs", start_run, methods=["POST"]),
            _Route("/ui/threads", threads_page),
            _Route("/ui/store", store_threads_page),
            _Route("/ui/threads/{thread_id}", thread_page),
            _Route("/ui/threads/{thread_id}/runs/{run_id}", run_page),
            _Route("/ui/threads/{thread_id}/resume", resume, methods=["POST"]),
            _Route("/ui/threads/{thread_id}/fork", fork, methods=["POST"]),
            _Route("/ui/threads/{thread_id}/diff", diff_page),
            _Route("/ui/threads/{thread_id}/provenance", provenance_page),
            _Route("/ui/agents/{name}", chat_page),
            _Route("/ui/agents/{name}/messages", send_message, methods=["POST"]),
            Mount("/ui/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ],
        exception_handlers={ValueError: _bad_number, ServerRecordsThread: _server_records},
    )
    app.state.sandbox = sandbox
    return app
