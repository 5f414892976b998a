"""HTML views of a graph's drawing, a store, an agent, its step and pending interrupts.

They take plain values, or objects read by their public attributes only (an
``AgentStep``, ``Interrupt``s), so any layer can use them. The views of runs and
histories are in ``_engine.views``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from nodestep._display import html
from nodestep._display.text import plural, readable_time

__all__ = [
    "agent_html",
    "agent_step_html",
    "branch_html",
    "graph_html",
    "interrupts_part",
    "store_html",
]


def graph_html(name: str, state: str, svg: str | None, nodes: int) -> str:
    """Return a graph's panel: its name, state class and drawing (``svg``, made by
    ``Graph.to_svg``, so already escaped), or a note that it has no flow yet."""
    title = f"Graph {name!r} over {state}"
    if svg is None:
        return html.panel(title, html.note("No flow yet: declare it with graph.flow(...)."))
    return html.panel(
        f"{title}: {plural(nodes, 'node')}", f"<div>{svg}</div>", kind="nodestep-graph"
    )


def store_html(kind: str, location: str, threads: int | None, notes: Sequence[str] = ()) -> str:
    """Return a store's panel: its kind, where it keeps histories, and its thread count
    (``None`` where counting would need a query)."""
    rows = [("kind", html.text(kind)), ("location", html.text(location))]
    if threads is not None:
        rows.append(("threads", str(threads)))
    rows += [("", html.text(n)) for n in notes]
    return html.panel(kind, html.fields(rows), kind="nodestep-store")


def agent_html(
    name: str, start: str, nodes: Iterable[tuple[str, str]], store: str, svg: str
) -> str:
    """Return an agent's panel: its name, the node a step starts at, its nodes by kind,
    and its graph's drawing (``svg``, made by ``Graph.to_svg``, so already escaped)."""
    listing = html.table(("node", "kind"), [(html.text(n), html.text(k)) for n, k in nodes])
    rows = [("start node", html.text(start)), ("store", html.text(store))]
    return html.panel(
        f"Agent {name!r}", html.fields(rows), listing, f"<div>{svg}</div>", kind="nodestep-agent"
    )


def agent_step_html(step: Any) -> str:
    """Return an ``AgentStep``: its status, the reply, and an error or what it asks."""
    rows = [
        ("status", html.status(step.status)),
        ("conversation", html.text(step.execution_id)),
        ("output", html.text(step.output) if step.output else html.note("(none)")),
    ]
    if step.error:
        rows.append(("error", html.text(step.error)))
    if step.failed_nodes:
        rows.append(("failed nodes", html.text(", ".join(step.failed_nodes))))
    parts = [html.fields(rows)]
    if step.interrupts:
        parts.append(interrupts_part(step.interrupts))
        parts.append(html.note("Answer with <code>agent.step(resume=...)</code>."))
    return html.panel("AgentStep", *parts, kind="nodestep-agent-step")


def interrupts_part(interrupts: Iterable[Any]) -> str:
    """Return pending interrupts as a table: node, id, what it asks, the key to answer."""
    rows = [
        (html.text(i.node), html.text(i.id), html.code(i.payload), html.text(i.key))
        for i in interrupts
    ]
    return html.table(("node", "id", "asks", "answer by key"), rows)


def branch_html(branch: Any) -> str:
    """Return a ``BranchRecord``: the branch, where it forks from, and when."""
    rows = [
        ("branch", html.text(branch.id)),
        ("thread", html.text(branch.thread_id)),
        ("forked from", html.text(f"{branch.parent_id} after event #{branch.from_sequence}")),
        ("event", html.text(branch.from_event_id)),
        ("created", html.text(readable_time(branch.created_at))),
    ]
    return html.panel("BranchRecord", html.fields(rows), kind="nodestep-branch")
