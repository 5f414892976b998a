"""The chat view of an Agent (a specs folder): the conversation, each node's state, and
the tools it called.

An agent's thread keeps, besides each LLMNode's conversation, a record per node (kind,
status, error, what its last run took and gave); the view reads them from the state at
the thread's head. A message is sent as the agent's own ``step`` sends one: a delivery to
the start node, which is marked running. The run goes through the API in the background,
and the view follows it: the reply streams into the page token by token (the run's
``messages`` stream), and the page then shows the thread as the run left it.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from nodestep import Agent
from nodestep.sandbox._reads import ApiRefusal, Sandbox
from nodestep.sandbox._render import read_form, render, sandbox_of

__all__ = ["chat_page", "send_message"]


def _agent(sandbox: Sandbox, name: str) -> Agent | None:
    return sandbox.agents.get(name)


def _unknown(request: Request, name: str) -> Response:
    known = ", ".join(sorted(sandbox_of(request).agents)) or "none"
    message = f"No agent is named {name!r}; the agents served are: {known}."
    return render(request, "error.html", 404, message=message)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def conversation_field(agent: Agent) -> str:
    """Return the state field holding the start node's conversation ("" for none).

    The agent's state class names it (``chat_messages``), as a served agent's ``messages``.
    """
    return getattr(agent.graph.schema.cls, "chat_messages", None) or ""


async def chat_page(request: Request) -> Response:
    """The agent's conversation on a thread, with its nodes' state and the tools called."""
    sandbox = sandbox_of(request)
    name = request.path_params["name"]
    agent = _agent(sandbox, name)
    if agent is None:
        return _unknown(request, name)
    thread_id = request.query_params.get("thread", "")
    run_id = request.query_params.get("run", "")
    values: dict[str, Any] = {}
    if thread_id:
        values, _ = await sandbox.state_at(agent.graph, thread_id, None, "main")
    live = ""
    if thread_id and run_id:  # a run this page sent: follow it, then show its end
        if not _is_uuid(run_id):
            message = f"run={run_id!r} is not a run's id (a UUID); send the message again."
            return render(request, "error.html", 400, message=message)
        run = f"/threads/{quote(thread_id, safe='')}/runs/{run_id}"
        try:
            await sandbox.call("GET", run)
        except ApiRefusal as e:
            return render(request, "error.html", e.status, message=e.detail)
        live = "/ui/api" + run
    nodes = values.get("nodes") or {}
    tools = {n: r for n, r in nodes.items() if r.get("kind") == "ToolNode" and r.get("input")}
    return render(
        request,
        "chat.html",
        name=name,
        thread_id=thread_id,
        messages=values.get(conversation_field(agent)) or [],
        nodes=sorted(nodes.items()),
        tools=sorted(tools.items()),
        start=agent.start_node,
        live=live,
    )


async def send_message(request: Request) -> Response:
    """Send the user's message to the agent's start node; show the reply as it comes."""
    form = await read_form(request)
    if isinstance(form, Response):
        return form
    sandbox = sandbox_of(request)
    name = request.path_params["name"]
    agent = _agent(sandbox, name)
    if agent is None:
        return _unknown(request, name)
    text = form.get("message", "").strip()
    if not text:
        return render(request, "error.html", 400, message="The message is empty; write one.")
    thread_id = form.get("thread") or str(uuid.uuid4())
    patch = agent.step_input(text)
    try:
        await sandbox.call("POST", "/threads", {"thread_id": thread_id, "if_exists": "do_nothing"})
        # An agent's nodes read the call context; a step from here has none to give.
        body = {
            "assistant_id": name,
            "input": patch,
            "context": {},
            "stream_mode": ["messages-tuple"],
        }
        run = await sandbox.call("POST", f"/threads/{thread_id}/runs", body)
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    return RedirectResponse(
        f"/ui/agents/{name}?thread={thread_id}&run={run['run_id']}", status_code=303
    )
