"""The pages under ``/ui``: each a handler that reads, then renders one template.

The one value put on a page as markup is the graph's drawing: SVG that ``Graph.to_svg``
makes with every name escaped.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import cast
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nodestep import NodestepError
from nodestep.sandbox._answers import questions, resume_answers
from nodestep.sandbox._chat import chat_page, send_message
from nodestep.sandbox._compare import diff_page, fork, provenance_page
from nodestep.sandbox._forms import FormError, form_fields, read_input
from nodestep.sandbox._reads import PAGE, ApiRefusal, Sandbox, entry_nodes
from nodestep.sandbox._render import (
    STREAM_MODES,
    read_form,
    render,
    run_and_show,
    sandbox_of,
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
        rows=page.threads,
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
    try:
        run = await sandbox.call("GET", f"/threads/{thread_id}/runs/{run_id}")
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
        stream=f"/ui/api/threads/{thread_id}/runs/{run_id}",
        # A run with input starts at the entry nodes; a resume or continuation elsewhere.
        entry=entry_nodes(graph) if (run.get("kwargs") or {}).get("input") is not None else [],
    )


async def login_page(request: Request) -> Response:
    """The login form: the token once, then a cookie."""
    return render(request, "login.html", next=request.query_params.get("next", "/ui"), error="")


async def login(request: Request) -> Response:
    """Check the token; set the cookie and go on, or show the form again."""
    form = await read_form(request)
    if isinstance(form, Response):
        return form
    guard = request.app.state.guard
    target = form.get("next", "/ui")
    target = target if target.startswith("/ui") else "/ui"
    if not guard.token_matches(form.get("token", "")):
        return render(request, "login.html", 401, next=target, error="That token is not right.")
    answer = RedirectResponse(target, status_code=303)
    name, value = guard.set_cookie()
    answer.raw_headers.append((name, value))
    return answer


async def _bad_number(request: Request, error: Exception) -> Response:
    message = f"A number in the address is not a number ({error}); fix the link."
    return render(request, "error.html", 400, message=message)


def pages_app(sandbox: Sandbox) -> Starlette:
    """Return the Starlette app of the pages, with ``sandbox`` on its state.

    The caller puts the ``Guard`` in front of it on ``app.state.guard`` too: the login
    form checks the token and sets the cookie through it.
    """
    app = Starlette(
        routes=[
            Route("/ui", index),
            Route("/ui/", index),
            Route("/ui/login", login_page, methods=["GET"]),
            Route("/ui/login", login, methods=["POST"]),
            Route("/ui/graphs/{name}", graph_page),
            Route("/ui/graphs/{name}/runs", start_run, methods=["POST"]),
            Route("/ui/threads", threads_page),
            Route("/ui/store", store_threads_page),
            Route("/ui/threads/{thread_id}", thread_page),
            Route("/ui/threads/{thread_id}/runs/{run_id}", run_page),
            Route("/ui/threads/{thread_id}/resume", resume, methods=["POST"]),
            Route("/ui/threads/{thread_id}/fork", fork, methods=["POST"]),
            Route("/ui/threads/{thread_id}/diff", diff_page),
            Route("/ui/threads/{thread_id}/provenance", provenance_page),
            Route("/ui/agents/{name}", chat_page),
            Route("/ui/agents/{name}/messages", send_message, methods=["POST"]),
            Mount("/ui/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ],
        exception_handlers={ValueError: _bad_number},
    )
    app.state.sandbox = sandbox
    return app
