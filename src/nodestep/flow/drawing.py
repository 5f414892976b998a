"""Describe a flow: as a Mermaid flowchart, and as data (a spec a loader could rebuild from)."""

from __future__ import annotations

import re
from typing import Any

from nodestep.flow.edges import END, Terminal
from nodestep.flow.nodes import Node
from nodestep.flow.routing import Branch, When
from nodestep.flow.validation import Flow

__all__ = ["import_path", "to_mermaid", "to_spec"]


def import_path(obj: Any) -> str:
    """Return ``"module:qualname"`` for a function or class (``<lambda>`` shows as such)."""
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{module}:{name}"


def _mermaid_ids(names: list[str]) -> dict[str, str]:
    ids: dict[str, str] = {"START": "START", "END": "END"}
    used = {"START", "END"}
    for name in names:
        base = re.sub(r"\W", "_", name) or "node"
        if base[0].isdigit() or base in ("START", "END", "end", "graph", "flowchart"):
            base = f"n_{base}"
        candidate, i = base, 2
        while candidate in used:
            candidate, i = f"{base}_{i}", i + 1
        used.add(candidate)
        ids[name] = candidate
    return ids


def _label(text: str) -> str:
    return text.replace('"', "#quot;")


def _end_name(target: Node | Terminal) -> str:
    return target.name


def to_mermaid(flow: Flow) -> str:
    """Return a Mermaid flowchart: edges solid, branch keys as labels, declared gotos dashed."""
    ids = _mermaid_ids(list(flow.nodes))
    lines = ["flowchart TD", "  START([START])"]
    lines += [f'  {ids[name]}["{_label(name)}"]' for name in flow.nodes]
    lines.append("  END([END])")
    lines.append(f"  START --> {ids[flow.start]}")
    for name in flow.nodes:
        route = flow.edges.get(name)
        src = ids[name]
        if isinstance(route, str):
            lines.append(f"  {src} --> {ids[route]}")
        elif route is END:
            lines.append(f"  {src} --> END")
        elif isinstance(route, When):
            pred = getattr(route.predicate, "__name__", "when")
            lines.append(f'  {src} -- "{_label(pred)}" --> {ids[_end_name(route.target)]}')
            lines.append(f'  {src} -- "otherwise" --> {ids[_end_name(route.otherwise)]}')
        elif isinstance(route, Branch):
            for key, mapped in route.mapping.items():
                lines.append(f'  {src} -- "{_label(str(key))}" --> {ids[_end_name(mapped)]}')
        for declared in sorted(flow.declared[name]):
            lines.append(f"  {src} -.-> {ids[declared]}")
    return "\n".join(lines) + "\n"


def _target_spec(target: Node | Terminal) -> str:
    return target.name


def to_spec(
    flow: Flow, *, name: str, state: type, max_steps: int, timeout: float | None
) -> dict[str, Any]:
    """Return the graph as plain data: its state class, nodes and edges by import path."""
    nodes = []
    for n in flow.nodes.values():
        nodes.append(
            {
                "name": n.name,
                "function": import_path(n.fn),
                "async": n.is_async,
                "goto": sorted(flow.declared[n.name]),
                "timeout": n.timeout,
            }
        )
    edges: list[dict[str, Any]] = []
    for edge in flow.order:
        source = edge.source.name if isinstance(edge.source, Node | Terminal) else repr(edge.source)
        target = edge.target
        if isinstance(target, When):
            edges.append(
                {
                    "from": source,
                    "when": {
                        "predicate": import_path(target.predicate),
                        "then": _target_spec(target.target),
                        "otherwise": _target_spec(target.otherwise),
                    },
                }
            )
        elif isinstance(target, Branch):
            edges.append(
                {
                    "from": source,
                    "branch": {
                        "router": import_path(target.router),
                        "mapping": {str(k): _target_spec(v) for k, v in target.mapping.items()},
                    },
                }
            )
        else:
            edges.append({"from": source, "to": _target_spec(target)})
    return {
        "name": name,
        "state": import_path(state),
        "max_steps": max_steps,
        "timeout": timeout,
        "start": flow.start,
        "nodes": nodes,
        "edges": edges,
    }
