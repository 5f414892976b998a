"""What every page shares: the templates, the posted form, and starting a run.

Templates are rendered with autoescaping on, so every value (a state's, a thread's
metadata, a node's name) is text on the page, never markup.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from nodestep.sandbox._reads import ApiRefusal, Sandbox, ago

__all__ = [
    "STREAM_MODES",
    "read_form",
    "render",
    "run_and_show",
    "sandbox_of",
    "segment",
    "summary",
    "thread_path",
]

_HERE = Path(__file__).parent
STREAM_MODES = ["updates", "custom", "messages-tuple", "values", "debug"]
"""What a run started from the sandbox streams: tasks, custom events, tokens, the state,
and the routes and merges of each superstep (``debug``)."""


def _short(value: Any, width: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def summary(record: dict[str, Any]) -> str:
    """Return one line about an event: its step, the nodes it records, its input."""
    parts = []
    if "step" in record:
        parts.append(f"step {record['step']}")
    tasks = record.get("tasks")
    if isinstance(tasks, dict | list) and tasks:
        parts.append("nodes " + ", ".join(str(t) for t in tasks))
    for key in ("status", "node", "error"):
        if isinstance(record.get(key), str):
            parts.append(f"{key} {record[key]}")
    if "input" in record:
        parts.append("input " + _short(record["input"]))
    return "; ".join(parts)


def segment(text: Any) -> str:
    """Return ``text`` as one segment of a URL's path, every reserved character escaped.

    Why not Jinja's ``urlencode``: it leaves ``/`` as is, and an id ``shop/north/7`` must
    stay one segment; ``?``, ``#``, ``%`` and spaces must not end the path or mean a
    fragment. Every id, branch, event and graph name put into a link goes through this.
    """
    return quote(str(text), safe="")


def thread_path(thread_id: str) -> str:
    """Return the path of a thread's page, ``/ui/threads/ID`` with the id escaped."""
    return f"/ui/threads/{segment(thread_id)}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["ago"] = ago
    env.filters["summary"] = summary
    env.filters["tojson_pretty"] = _pretty
    env.filters["segment"] = segment
    return env


_ENV = _environment()


def sandbox_of(request: Request) -> Sandbox:
    sandbox: Sandbox = request.app.state.sandbox
    return sandbox


def render(request: Request, template: str, code: int = 200, **values: Any) -> HTMLResponse:
    """Render a template with the CSRF token and the graphs every page shows."""
    sandbox = sandbox_of(request)
    page = _ENV.get_template(template).render(
        csrf=sandbox.csrf, graphs=sorted(sandbox.graphs), agents=sorted(sandbox.agents), **values
    )
    return HTMLResponse(page, status_code=code)


async def read_form(request: Request) -> dict[str, str] | Response:
    """Return the posted form, or the refusal of a post without the CSRF token.

    The forms are URL-encoded (no file uploads), so they are read here, without the
    multipart parser Starlette's ``request.form()`` needs.
    """
    body = (await request.body()).decode("utf-8", errors="replace")
    fields = dict(parse_qsl(body, keep_blank_values=True))
    if not hmac.compare_digest(fields.get("csrf", "").encode(), sandbox_of(request).csrf.encode()):
        message = "This form has no valid CSRF token: reload the page and send it again."
        return render(request, "error.html", 403, message=message)
    return fields


async def run_and_show(request: Request, thread_id: str, body: dict[str, Any]) -> Response:
    """Start a run through the API; redirect to its live view, or show the refusal."""
    try:
        run = await sandbox_of(request).call("POST", f"/threads/{segment(thread_id)}/runs", body)
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    where = f"{thread_path(thread_id)}/runs/{segment(run['run_id'])}"
    return RedirectResponse(where, status_code=303)
