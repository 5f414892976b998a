"""What the pages show, read from the graphs, the store and the API.

Why reads go to the store directly and writes through the API: a page of history is a
``store.read`` of one range of sequence numbers, so a thread of 10,000 events costs what
one of 50 does; a run started from a page goes through the API, so it is stored, queued
and streamed as any client's run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from nodestep import Agent, Graph
from nodestep.serve._registry import REGISTRY_THREAD
from nodestep.state import to_json_value
from nodestep.store import BranchRecord, Record, StateStore

__all__ = [
    "PAGE",
    "REGISTRY_THREAD",
    "Branch",
    "Field",
    "Sandbox",
    "ServerRecordsThread",
    "TimelinePage",
    "entry_nodes",
]

PAGE = 50
"""Events on one page of a thread's timeline."""


@dataclass(frozen=True, slots=True)
class Field:
    """A state field as the graph page shows it: name, type and reducer."""

    name: str
    type: str
    reducer: str | None


@dataclass(slots=True)
class Branch:
    """A branch and the branches forked from it, for the tree on the thread page."""

    id: str
    parent: str | None
    from_sequence: int
    children: list[Branch] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TimelinePage:
    """One page of a branch's events, newest first, and where the next pages start."""

    events: list[Record]
    last: int
    newer: int | None
    older: int | None


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None)
    if text and not getattr(annotation, "__args__", None):
        return str(text)
    return str(annotation).replace("typing.", "")


def entry_nodes(graph: Graph[Any]) -> list[str]:
    """Return the nodes a new run starts with: the targets of the graph's edges from START.

    Read from ``Graph.to_spec``; a graph it cannot describe (a node made of a lambda, say)
    gives ``[]``, and its drawing then colours nodes from their first update on.
    """
    try:
        spec = graph.to_spec()
    except Exception:  # any graph to_spec cannot describe: the drawing still works
        return []
    edges = spec.get("edges") or []
    return [e["to"] for e in edges if e.get("from") == "START" and isinstance(e.get("to"), str)]


def _tree(branches: list[BranchRecord]) -> Branch:
    nodes = {"main": Branch("main", None, 0)}
    for record in branches:
        nodes[record.id] = Branch(record.id, record.parent_id, record.from_sequence)
    for node in nodes.values():
        if node.parent is not None:
            nodes.get(node.parent, nodes["main"]).children.append(node)
    for node in nodes.values():
        node.children.sort(key=lambda b: (b.from_sequence, b.id))
    return nodes["main"]


class Sandbox:
    """The graphs, the store and the API the pages read and write through.

    Args:
        graphs: The graphs by name.
        store: The store the API keeps threads in.
        api: The API app (called in this process).
        token: The API token, sent with every call.
    """

    def __init__(
        self, graphs: dict[str, Graph[Any]], store: StateStore, api: Any, token: str | None
    ) -> None:
        self.graphs = graphs
        self.agents: dict[str, Agent] = {}
        self.store = store
        self.csrf = ""
        headers = {"x-api-key": token} if token else {}
        self.api = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://127.0.0.1", headers=headers
        )

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        """Call the API; return its JSON answer, or raise ``ApiRefusal`` with its detail."""
        answer = await self.api.request(method, path, json=body)
        try:
            data = answer.json() if answer.content else None
        except ValueError:  # an answer that is not JSON (a plain-text 500): its text
            data = {"detail": answer.text}
        if answer.status_code >= 400:
            detail = data.get("detail") if isinstance(data, dict) else answer.text
            raise ApiRefusal(answer.status_code, str(detail))
        return data

    def graph(self, name: str) -> Graph[Any]:
        """Return the graph ``name``; raise ``LookupError`` naming the graphs served."""
        try:
            return self.graphs[name]
        except KeyError:
            known = ", ".join(sorted(self.graphs))
            raise LookupError(f"No graph is named {name!r}; the sandbox serves {known}.") from None

    def fields(self, graph: Graph[Any]) -> list[Field]:
        """Return the state fields of ``graph``, with their types and reducers."""
        shown = []
        for name, spec in graph.schema.fields.items():
            reducer = getattr(spec.channel, "reducer", None)
            label = getattr(reducer, "__name__", None) or (repr(reducer) if reducer else None)
            shown.append(Field(name, _type_name(spec.annotation), label))
        return shown

    async def threads(
        self, status: str | None, metadata: dict[str, Any], offset: int, limit: int
    ) -> list[dict[str, Any]]:
        """Return a page of the server's threads, filtered by status and metadata."""
        body: dict[str, Any] = {"limit": limit, "offset": offset, "metadata": metadata}
        if status:
            body["status"] = status
        found: list[dict[str, Any]] = await self.call("POST", "/threads/search", body)
        return found

    async def timeline(
        self, thread_id: str, branch_id: str, upto: int | None, size: int = PAGE
    ) -> TimelinePage:
        """Return the page of events ending at ``upto`` (``None``: the newest)."""
        last = await self.store.last_sequence(thread_id, branch_id)
        stop = last if upto is None else max(0, min(upto, last))
        start = max(1, stop - size + 1)
        events = await self.store.read(thread_id, branch_id, start=start, stop=stop) if stop else []
        events.reverse()
        newer = min(last, stop + size) if stop < last else None
        older = start - 1 if start > 1 else None
        return TimelinePage(events, last, newer, older)

    async def branches(self, thread_id: str) -> Branch:
        """Return the thread's branches as a tree rooted at ``main``."""
        return _tree(await self.store.list_branches(thread_id))

    async def state_at(
        self, graph: Graph[Any], thread_id: str, event_id: str | None, branch_id: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return the state's JSON values after event ``event_id`` (``None``: the latest),
        and the interrupts pending there, by key."""
        if event_id is None and not await self.store.last_sequence(thread_id, branch_id):
            return {}, {}
        snapshot = await graph.get_state(
            thread_id, event_id, branch_id=None if event_id else branch_id, state_store=self.store
        )
        values = to_json_value(snapshot.value)
        return (values if isinstance(values, dict) else {"value": values}), snapshot.interrupts

    async def shown_branch(self, thread_id: str) -> str:
        """Return the branch the server shows and runs for the thread (``main`` at first;
        a fork made through the API, after it)."""
        try:
            row = await self.call("GET", f"/threads/{quote(thread_id, safe='')}")
        except ApiRefusal:
            return "main"
        return str(row.get("branch_id") or "main")

    async def graph_of(self, thread_id: str) -> Graph[Any]:
        """Return the graph that ran the thread.

        The server's row names it (``graph_id``) for a thread run through the API; a
        thread written by other means gets the graph whose fields its first checkpoint
        holds, read with one short read; the first graph when none matches.

        Raises:
            ServerRecordsThread: ``thread_id`` is the server's own records, no graph's.
        """
        if thread_id == REGISTRY_THREAD:
            raise ServerRecordsThread(thread_id)
        try:
            row = await self.call("GET", f"/threads/{quote(thread_id, safe='')}")
        except ApiRefusal:
            row = {}
        name = str((row.get("metadata") or {}).get("graph_id"))
        if name in self.graphs:
            return self.graphs[name]
        first = await self.store.read(thread_id, "main", start=1, stop=1)
        held = set(first[0].get("values") or ()) if first else set()
        for graph in self.graphs.values():
            if held and held == set(graph.schema.fields):
                return graph
        return next(iter(self.graphs.values()))


class ApiRefusal(Exception):
    """The API refused a call the page made; ``detail`` says why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class ServerRecordsThread(LookupError):
    """The thread asked for is ``nodestep-serve``: the server's records, no graph's history.

    Why the pages leave it out: its records are the rows of the server's threads and runs
    (see ``docs/serving.md``), which no graph's state can be read from; the Threads page
    shows what they hold.
    """

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"Thread {thread_id!r} holds the server's own records (each thread's metadata, "
            f"status and shown branch, and each run), not the history of a graph, so it has "
            f"no state to show. The Threads page (/ui/threads) shows what it records."
        )
        self.thread_id = thread_id


def ago(ts: float) -> str:
    """Return a timestamp as the page shows it: UTC, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
