"""The documents of a manifest: which is the Graph, which are nodes, and their keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep._declarative.format import GRAPH_KEYS, MANIFEST_VERSION
from nodestep._declarative.yaml_tree import Problems, Y

__all__ = ["known_keys", "plain", "split_documents"]

_LIMAN_KINDS = ("LLMNode", "ToolNode", "FunctionNode", "ServiceAccount")
"""The kinds of a Liman specs folder, which ``Agent`` runs (see ``_liman_problem``)."""


def split_documents(docs: list[Y], problems: Problems) -> tuple[Y | None, list[Y]]:
    """Return the Graph document and every node (listed in it or a Node document)."""
    header: Y | None = None
    nodes: list[Y] = []
    for doc in docs:
        if not isinstance(doc.value, dict):
            problems.add(doc, "a manifest document is a mapping with 'nodestep: 1' and 'kind'")
            continue
        version = doc.value.get("nodestep")
        liman = _liman_problem(doc, version)
        if liman is not None:
            problems.add(doc.value["kind"], liman)
            continue
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


def _liman_problem(doc: Y, version: Y | None) -> str | None:
    """Return the problem of a Liman document in a nodestep manifest, or ``None``.

    Why refused rather than read: a Liman folder is a program of another shape. Its
    LLMNodes call their ToolNodes and get the answers back without edges, choose their
    prompts by the call's language, and each keeps its own conversation in a state
    ``Agent`` makes; a nodestep graph routes only along its edges, over the user's state
    class. So a Liman folder runs with ``Agent``, and a manifest declares the same two
    node kinds as ``type: llm`` and ``type: tool``.
    """
    kind = doc.value.get("kind")
    if version is not None or kind is None or kind.value not in _LIMAN_KINDS:
        return None
    return (
        f"a Liman {kind.value} document: a folder of Liman specs runs with "
        f"nodestep.Agent(specs_dir, start_node=..., llm=model); in a nodestep manifest, "
        f"declare a model or tool node as a node with 'type: llm' or 'type: tool' "
        f"(load_graph(..., node_types=agent_node_types(...)))"
    )


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
