"""The documents of a manifest: which is the Graph, which are nodes, and their keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep._declarative.format import GRAPH_KEYS, MANIFEST_VERSION
from nodestep._declarative.yaml_tree import Problems, Y

__all__ = ["known_keys", "plain", "split_documents"]


def split_documents(docs: list[Y], problems: Problems) -> tuple[Y | None, list[Y]]:
    """Return the Graph document and every node (listed in it or a Node document)."""
    header: Y | None = None
    nodes: list[Y] = []
    for doc in docs:
        if not isinstance(doc.value, dict):
            problems.add(doc, "a manifest document is a mapping with 'nodestep: 1' and 'kind'")
            continue
        version = doc.value.get("nodestep")
        # ``type() is int``: ``true == 1`` and ``1.0 == 1`` in Python, and neither is a version.
        if version is None or type(version.value) is not int or version.value != MANIFEST_VERSION:
            got = "no version" if version is None else f"version {version.value!r}"
            problems.add(
                version or doc,
                f"this nodestep reads manifest version {MANIFEST_VERSION}, and the document "
                f"has {got}; start it with 'nodestep: {MANIFEST_VERSION}'",
            )
            continue
        kind = doc.value.get("kind")
        if kind is not None and kind.value == "Graph":
            if header is not None:
                problems.add(
                    doc, f"a second Graph document (the first is at {header.at}); a graph has one"
                )
                continue
            header = doc
            known_keys(doc, GRAPH_KEYS, "a Graph document", problems)
            listed = doc.value.get("nodes")
            if listed is not None and not isinstance(listed.value, list):
                problems.add(listed, "'nodes' is a list of nodes, each with a name")
            elif listed is not None:
                nodes += listed.value
        elif kind is not None and kind.value == "Node":
            nodes.append(doc)
        else:
            problems.add(
                kind or doc,
                f"unknown document kind {kind.value if kind else None!r}; the kinds are Graph "
                f"and Node",
            )
    if header is None and docs:
        problems.add(
            docs[0], "no 'kind: Graph' document: one must give the name, state class and start node"
        )
    return header, nodes


def known_keys(y: Y, keys: Sequence[str], what: str, problems: Problems) -> None:
    for key, value in y.value.items():
        if key not in keys:
            problems.add(value, f"unknown key '{key}' in {what}; the keys are {', '.join(keys)}")


def plain(y: Y) -> Any:
    """Return the plain value of ``y``, its lists and mappings included."""
    if isinstance(y.value, dict):
        return {k: plain(v) for k, v in y.value.items()}
    if isinstance(y.value, list):
        return [plain(v) for v in y.value]
    return y.value
