"""The chat view of an Agent (a specs folder): the conversation, each node's state, and
the tools it called.

An agent's thread keeps, besides each LLMNode's conversation, a record per node (kind,
status, error, what its last run took and gave); the view reads them from the state at
the thread's head. A message is sent as the agent's own ``step`` sends one: a delivery to
the start node, which is marked running; the run goes through the API and the view shows
the thread once it has ended.
"""

from __future__ import annotations

import uuid
from typing import Any

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
    values: dict[str, Any] = {}
    if thread_id:
        values, _ = await sandbox.state_at(agent.graph, thread_id, None, "main")
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
    )


async def send_message(request: Request) -> Response:
    """Send the user's message to the agent's start node; show the thread after the run."""
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
        body = {"assistant_id": name, "input": patch, "context": {}}
        ended = await sandbox.call("POST", f"/threads/{thread_id}/runs/wait", body)
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    failure = ended.get("__error__") if isinstance(ended, dict) else None
    if failure:
        message = f"The agent failed: {failure.get('error')}: {failure.get('message')}"
        return render(request, "error.html", 422, message=message)
    return RedirectResponse(f"/ui/agents/{name}?thread={thread_id}", status_code=303)
