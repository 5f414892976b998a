"""The chat view of an Agent (a specs folder): the conversation, each node's state, and
the tools it called.

An agent's thread keeps, besides each LLMNode's conversation, a record per node (kind,
status, error, what its last run took and gave); the view reads them from the state at
the head of the branch the server shows and runs for the thread (after a fork, the
fork's). A message is sent as the agent's own ``step`` sends one: a delivery to the
start node, which is marked running. The run goes through the API in the background,
and the view follows it: the reply streams into the page token by token (the run's
``messages`` stream), and the page then shows the thread as the run left it.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from nodestep import Agent, NodestepError
from nodestep.sandbox._reads import REGISTRY_THREAD, ApiRefusal, Sandbox, ServerRecordsThread
from nodestep.sandbox._render import read_form, render, sandbox_of, segment, thread_path

__all__ = ["chat_page", "send_message"]


def _agent(sandbox: Sandbox, name: str) -> Agent | None:
    return sandbox.agents.get(name)


def _chat_address(name: str, thread_id: str, run_id: str) -> str:
    return f"/ui/agents/{segment(name)}?" + urlencode({"thread": thread_id, "run": run_id})


async def _not_a_conversation(
    request: Request, agent: Agent, name: str, thread_id: str, error: NodestepError
) -> Response:
    """The page for a thread whose history the agent's graph cannot read."""
    graph = await sandbox_of(request).graph_of(thread_id)
    if graph is not agent.graph:
        why = (
            f"Thread {thread_id!r} belongs to graph {graph.name!r}: it holds another "
            f"graph's state, not a conversation of agent {name!r}."
        )
    else:
        why = f"Thread {thread_id!r} cannot be read as a conversation of agent {name!r}: {error}"
    message = (
        f"{why} Open it on its thread page ({thread_path(thread_id)}), or start a new "
        f"conversation (/ui/agents/{segment(name)})."
    )
    return render(request, "error.html", 409, message=message)


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
    if thread_id == REGISTRY_THREAD:
        raise ServerRecordsThread(thread_id)
    if thread_id:
        # The branch the server shows and runs for the thread: after a fork, the fork's,
        # where the messages sent from here go.
        shown = await sandbox.shown_branch(thread_id)
        try:
            values, _ = await sandbox.state_at(agent.graph, thread_id, None, shown)
        except NodestepError as e:
            return await _not_a_conversation(request, agent, name, thread_id, e)
    live = ""
    if thread_id and run_id:  # a run this page sent: follow it, then show its end
        if not _is_uuid(run_id):
            message = f"run={run_id!r} is not a run's id (a UUID); send the message again."
            return render(request, "error.html", 400, message=message)
        run = f"/threads/{segment(thread_id)}/runs/{run_id}"
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
        run = await sandbox.call("POST", f"/threads/{segment(thread_id)}/runs", body)
    except ApiRefusal as e:
        return render(request, "error.html", e.status, message=e.detail)
    return RedirectResponse(_chat_address(name, thread_id, run["run_id"]), status_code=303)
