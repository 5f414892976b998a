"""Fork a thread from an event with an edited state, compare branches, trace a field.

Why the fork goes through the API (``POST /threads/{id}/state`` with the event's id):
that is the server's time travel, so the new branch becomes the branch the thread shows,
and the run that follows is an ordinary run of the server on it. Only the fields whose
value the form changed are written, through the graph's reducers, as a node's write
would be. A fork of an event where the run paused starts no run: the new branch waits
for the same answers, and the page goes to its interrupt form (a run with no answer
would fail, as resuming without one does).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from nodestep import NodestepError
from nodestep.sandbox._forms import FormError
from nodestep.sandbox._reads import ApiRefusal
from nodestep.sandbox._render import (
    STREAM_MODES,
    read_form,
    render,
    run_and_show,
    sandbox_of,
    segment,
    thread_path,
)

__all__ = ["diff_page", "fork", "provenance_page"]


def edited_values(before: dict[str, Any], form: dict[str, str]) -> dict[str, Any]:
    """Return the fields whose JSON the fork form changed, with their new values.

    Raises:
        FormError: a field's box holds text that is not JSON.
    """
    changed: dict[str, Any] = {}
    for name, old in before.items():
        text = form.get(f"value.{name}")
        if text is None:
            continue
        try:
            new = json.loads(text)
        except ValueError as e:
            raise FormError(
                f"Field {name!r} must be JSON to fork with it; got {text!r}. Write a string "
                f'in double quotes ("like this"), a number, a list or an object.'
            ) from e
        if new != old:
            changed[name] = new
    return changed


async def fork(request: Request) -> Response:
    """Fork the thread at an event with the edited values, and run the new branch (or,
    forked where a run paused, show the new branch's interrupt form)."""
    form = await read_form(request)
    if isinstance(form, Response):
        return form
    sandbox = sandbox_of(request)
    thread_id = request.path_params["thread_id"]
    at = form.get("at", "")
    graph = await sandbox.graph_of(thread_id)
    try:
        before, _ = await sandbox.state_at(graph, thread_id, at, "main")
        values = edited_values(before, form)
        snapshot = await graph.get_state(thread_id, at, state_store=sandbox.store)
    except (NodestepError, FormError) as e:
        return render(request, "error.html", 400, message=str(e))
    try:
        await sandbox.call(
            "POST",
            f"/threads/{segment(thread_id)}/state",
            {"values": values, "checkpoint_id": at},
        )
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    if snapshot.interrupts:  # paused there: the new branch waits for the same answers
        return RedirectResponse(f"{thread_path(thread_id)}#interrupts", status_code=303)
    # An unfinished step at the event goes on; a finished one starts a new turn.
    start: dict[str, Any] | None = None if snapshot.next else {}
    body = {"assistant_id": graph.name, "input": start, "stream_mode": STREAM_MODES}
    return await run_and_show(request, thread_id, body)


async def diff_page(request: Request) -> Response:
    """The diff of two branches (or events): fork point, changed fields, events since."""
    sandbox = sandbox_of(request)
    thread_id = request.path_params["thread_id"]
    a = request.query_params.get("a", "main")
    b = request.query_params.get("b", "")
    if not b:
        return RedirectResponse(thread_path(thread_id), status_code=303)
    graph = await sandbox.graph_of(thread_id)
    try:
        found = await graph.diff(thread_id, a, b, state_store=sandbox.store)
    except NodestepError as e:
        return render(request, "error.html", 404, message=str(e))
    return render(request, "diff.html", thread_id=thread_id, diff=found, a=a, b=b)


async def provenance_page(request: Request) -> Response:
    """Who wrote a field's value at an event: every write merged into it, oldest first."""
    sandbox = sandbox_of(request)
    thread_id = request.path_params["thread_id"]
    query = request.query_params
    field = query.get("field", "")
    at = query.get("at") or None
    branch = query.get("branch") or None
    graph = await sandbox.graph_of(thread_id)
    try:
        found = await graph.provenance(
            thread_id, field, at=at, branch_id=None if at else branch, state_store=sandbox.store
        )
    except NodestepError as e:
        return render(request, "error.html", 404, message=str(e))
    back = urlencode({"branch": found.branch_id, "at": found.event_id})
    return render(request, "provenance.html", thread_id=thread_id, found=found, back=back)
