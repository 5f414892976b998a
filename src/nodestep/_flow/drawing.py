"""Describe a flow: as a Mermaid flowchart, and as data (a spec a loader could rebuild from)."""

from __future__ import annotations

import re
from typing import Any

from nodestep._errors import GraphConfigError
from nodestep._flow.edges import END, Terminal
from nodestep._flow.nodes import Node
from nodestep._flow.routing import Branch, When
from nodestep._flow.validation import Flow, Join

__all__ = ["import_path", "predicate_label", "to_mermaid", "to_spec"]


def import_path(obj: Any) -> str:
    """Return ``"module:qualname"`` for a function or class (``<lambda>`` shows as such)."""
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{module}:{name}"


# The ids Mermaid's flowchart parser takes as its own words: a node with one of them as
# its id fails the whole diagram ("Parse error on line 3"), as Mermaid 11 shows. Our
# START and END boxes keep their ids, so a node named so gets another.
_MERMAID_WORDS = frozenset(
    {
        "START",
        "END",
        "end",
        "graph",
        "flowchart",
        "subgraph",
        "style",
        "linkStyle",
        "class",
        "classDef",
        "click",
        "call",
        "href",
        "interpolate",
        "_self",
        "_blank",
        "_parent",
        "_top",
    }
)


def _mermaid_ids(names: list[str]) -> dict[str, str]:
    ids: dict[str, str] = {"START": "START", "END": "END"}
    used = {"START", "END"}
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "node"  # ASCII: any Mermaid reads it
        if base[0].isdigit() or base in _MERMAID_WORDS:
            base = f"n_{base}"
        candidate, i = base, 2
        while candidate in used:
            candidate, i = f"{base}_{i}", i + 1
        used.add(candidate)
        ids[name] = candidate
    return ids


# Mermaid's entity codes (``#name;`` or ``#number;``) for what would end a quoted label,
# open HTML or start a Markdown string, and for ``#`` itself, so that a name that holds
# ``#quot;`` stays text. Characters that are not printable, line breaks among them (also
# the Unicode ones, which end a line in JavaScript), get their number.
_NAMED = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "#": "#35;", "`": "#96;"}


def _label(text: str) -> str:
    return "".join(_NAMED.get(ch) or (ch if ch.isprintable() else f"#{ord(ch)};") for ch in text)


def _end_name(target: Node | Terminal) -> str:
    return target.name


def to_mermaid(flow: Flow) -> str:
    """Return a Mermaid flowchart: edges solid, branch keys as labels, declared gotos dashed.

    Every label is quoted, with Mermaid's entity codes for ``"``, ``<``, ``>``, ``&``, ``#``,
    backticks, line breaks and other control characters, so any node name or branch key
    draws as written and none can break the diagram.
    """
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
        elif isinstance(route, tuple):
            lines.extend(f"  {src} --> {ids[target]}" for target in route)
        elif isinstance(route, Join):  # a thick arrow: the target waits for all its sources
            lines.append(f"  {src} ==> {ids[route.target]}")
        elif route is END:
            lines.append(f"  {src} --> END")
        elif isinstance(route, When):
            for link in route.links():
                pred = predicate_label(link.predicate)
                lines.append(f'  {src} -- "{_label(pred)}" --> {ids[_end_name(link.target)]}')
            lines.append(f'  {src} -- "otherwise" --> {ids[_end_name(route.fallback())]}')
        elif isinstance(route, Branch):
            for key, mapped in route.mapping.items():
                lines.append(f'  {src} -- "{_label(str(key))}" --> {ids[_end_name(mapped)]}')
        for declared in sorted(flow.declared[name]):
            lines.append(f"  {src} -.-> {ids[declared]}")
    return "\n".join(lines) + "\n"


def predicate_label(predicate: Any) -> str:
    """Return the label of a ``when`` edge: the condition's text, or the function's name."""
    text = getattr(predicate, "text", None)  # a condition labels its edge with its text
    return text if isinstance(text, str) else getattr(predicate, "__name__", "when")


def _target_spec(target: Node | Terminal) -> str:
    return target.name


def to_spec(
    flow: Flow, *, name: str, state: type, max_steps: int, timeout: float | None
) -> dict[str, Any]:
    """Return the graph as plain data: its state class, nodes and edges by import path.

    Why it refuses some graphs: a spec names every function by import path, so that a
    loader could rebuild the graph, and writes branch keys as JSON object keys (text). A
    spec that could not be loaded back, or loaded back differently, is worse than none.

    Raises:
        GraphConfigError: listing every part the spec cannot name: a function or state
            class without an import path (a lambda, one defined inside a function, a bound
            method or other callable object), or branch keys that read the same as text
            (``1`` and ``"1"``).
    """
    problems: list[str] = []
    _check_importable(f"The state class {state.__name__!r}", state, problems)
    nodes = []
    for n in flow.nodes.values():
        _check_importable(f"Node '{n.name}' runs a function that", n.fn, problems)
        entry = {
            "name": n.name,
            "function": import_path(n.fn),
            "async": n.is_async,
            "goto": sorted(flow.declared[n.name]),
            "timeout": n.timeout,
        }
        if n.defer:  # keys a node has only when set, so older specs read the same
            entry["defer"] = True
        if n.input_model is not None:
            _check_importable(f"Node '{n.name}' takes an input model that", n.input_model, problems)
            entry["input"] = import_path(n.input_model)
        nodes.append(entry)
    edges = [_edge_spec(edge.source, edge.target, problems) for edge in flow.order]
    if problems:
        listing = "\n".join(f"- {p}" for p in problems)
        raise GraphConfigError(
            f"Graph '{name}' cannot be written as a spec that loads back:\n{listing}", problems
        )
    return {
        "name": name,
        "state": import_path(state),
        "max_steps": max_steps,
        "timeout": timeout,
        "start": flow.start,
        "nodes": nodes,
        "edges": edges,
    }


def _edge_spec(source: Any, target: Any, problems: list[str]) -> dict[str, Any]:
    if isinstance(source, tuple):  # a join: {"join": [sources], "to": target}
        return {"join": [n.name for n in source], "to": _target_spec(target)}
    src = source.name if isinstance(source, Node | Terminal) else repr(source)
    if isinstance(target, tuple):
        return {"from": src, "to": [n.name for n in target]}
    if isinstance(target, When):
        return {"from": src, "when": _when_spec(src, target, problems)}
    if isinstance(target, Branch):
        _check_importable(f"The branch() router after '{src}'", target.router, problems)
        mapping: dict[str, str] = {}
        keys: dict[str, Any] = {}
        for key, mapped in target.mapping.items():
            text = str(key)
            if text in keys:
                problems.append(
                    f"The branch() after '{src}' has the keys {keys[text]!r} and {key!r}, which "
                    f"a spec would both write as {text!r}; use keys that differ as text "
                    f"(e.g. only strings)"
                )
            keys[text] = key
            mapping[text] = _target_spec(mapped)
        return {"from": src, "branch": {"router": import_path(target.router), "mapping": mapping}}
    return {"from": src, "to": _target_spec(target)}


def _when_spec(src: str, target: When, problems: list[str]) -> dict[str, Any]:
    when: dict[str, Any] = {}
    text = getattr(target.predicate, "text", None)
    if isinstance(text, str):
        when["condition"] = text
    else:
        _check_importable(f"The when() predicate after '{src}'", target.predicate, problems)
        when["predicate"] = import_path(target.predicate)
    when["then"] = _target_spec(target.target)
    otherwise = target.otherwise
    if isinstance(otherwise, When):
        when["otherwise"] = _when_spec(src, otherwise, problems)
    else:
        when["otherwise"] = _target_spec(otherwise)
    return when


def _check_importable(what: str, obj: Any, problems: list[str]) -> None:
    """Add a problem unless ``import_path(obj)`` imports ``obj`` itself back."""
    path = import_path(obj)
    module, _, qualname = path.partition(":")
    bound = getattr(obj, "__self__", None)
    named = all(p.isidentifier() for p in (*module.split("."), *qualname.split(".")))
    if named and (bound is None or isinstance(bound, type)):
        return
    kind = "is a bound method" if named else f"has no import path ({path!r})"
    problems.append(
        f"{what} {kind}; a spec names functions by import path, so define it with def (or "
        f"class) at the top level of a module"
    )
