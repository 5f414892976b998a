"""``load_graph``: build a ``Graph`` from YAML manifests.

The loader reads every file, then checks everything it can before it builds anything:
versions and keys, node names, import paths, settings, targets and conditions. Every
problem is reported together, each at its file, line and column, as ``flow()`` reports
a flow's problems.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.condition import Condition, Source
from nodestep._declarative.documents import known_keys, plain, split_documents
from nodestep._declarative.format import (
    EDGE_KEYS,
    NODE_KEYS,
    SETTINGS,
)
from nodestep._declarative.imports import Importer
from nodestep._declarative.node_kinds import make_node
from nodestep._declarative.node_types import NodeType
from nodestep._declarative.settings import node_keywords
from nodestep._declarative.yaml_tree import Problems, Y, read_documents
from nodestep._errors import ConditionError, GraphConfigError
from nodestep._flow.edges import END, START, Terminal
from nodestep._flow.middleware import Middleware
from nodestep._flow.nodes import Node, node
from nodestep._flow.routing import When, when
from nodestep._graph.graph import Graph

__all__ = ["load_graph"]

_OWN_OPTIONS = ("name", "max_steps", "timeout")


def load_graph(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    functions: Mapping[str, Callable[..., Any]] | None = None,
    allowed_packages: Sequence[str] | None = None,
    node_types: Mapping[str, NodeType] | None = None,
    **options: Any,
) -> Graph[Any]:
    """Load a graph from YAML manifests: a file, a directory of them, or a list.

    A directory loads its ``*.yaml`` and ``*.yml`` files in name order. Together they
    hold one ``kind: Graph`` document and any number of ``kind: Node`` documents.

    Args:
        paths: The manifest files or directories.
        functions: The functions conditions may call, by dotted name, e.g.
            ``{"business_rules.validate": validate}``. A condition never imports code.
        allowed_packages: Only import code from these packages (and their modules); for
            manifests from less trusted places. ``None`` allows any.
        node_types: More node types, by the name a node gives as ``type:``, e.g.
            ``agent_node_types(models={"main": model}, tools=[search])`` from
            ``nodestep.agents`` for ``type: llm`` and ``type: tool``.
        **options: Passed to ``Graph`` (``state_store``, ``id_factory``, ``clock``, ...).

    Returns:
        The graph, with its flow, ready to run.

    Raises:
        GraphConfigError: listing every problem, each at its file, line and column.
    """
    _check_options(options)
    problems = Problems()
    types = _node_types(node_types)
    registry = _functions(functions, types)
    importer = Importer(allowed_packages, problems)
    files = _files(paths)
    docs = [doc for file in files for doc in read_documents(file, problems)]
    header, node_docs = split_documents(docs, problems)
    if not docs and not problems.items:
        problems.add(f"{files[0]}:1:1", "the manifests hold no document; start with 'nodestep: 1'")
    spec = _Spec(problems, importer, registry, types)
    if header is not None:
        spec.read_header(header)
    specs = [spec.read_node(doc) for doc in node_docs]
    spec.check_names(specs, header)
    edges = [spec.edges(s) for s in specs]
    problems.raise_if_any("The manifests have problems")
    graph = spec.graph(options)
    start = spec.nodes[spec.start.value]
    try:
        return graph.flow(START >> start, *[s.node >> e for s, e in zip(specs, edges, strict=True)])
    except ConditionError:
        raise  # already placed in its file
    except GraphConfigError as error:
        raise _placed(error, specs, header) from None


def _check_options(options: dict[str, Any]) -> None:
    clash = sorted(set(options) & set(_OWN_OPTIONS))
    if clash:
        raise GraphConfigError(
            f"load_graph() got {', '.join(clash)}, which the manifest sets; change them in "
            f"the manifest's Graph document."
        )


def _placed(error: GraphConfigError, specs: list[_NodeSpec], header: Y | None) -> GraphConfigError:
    """Place the flow's problems (a node it cannot reach, ...) at the node they name."""
    problems = Problems()
    names = {s.name.value: s.name for s in specs}
    for problem in error.problems:
        named = re.search(r"Node '([^']+)'", problem)
        where = names.get(named.group(1)) if named else None
        problems.add(where or header or "?:1:1", problem)
    return GraphConfigError(
        "The manifests describe a flow that cannot work:\n"
        + "\n".join(f"- {p}" for p in problems.items),
        problems.items,
    )


def _functions(
    functions: Mapping[str, Callable[..., Any]] | None, types: dict[str, NodeType]
) -> dict[str, Any]:
    """Return the condition functions: the node types', then the caller's, which win."""
    given = dict(functions or {})
    registry = {k: f for t in types.values() for k, f in t.functions.items()}
    registry.update(given)
    for key, fn in given.items():
        dotted = isinstance(key, str) and all(p.isidentifier() for p in key.split("."))
        if not dotted or not callable(fn):
            raise GraphConfigError(
                f"functions= maps dotted names to functions, e.g. "
                f"{{'rules.is_valid': is_valid}}; got {key!r}: {fn!r}."
            )
    return registry


def _node_types(node_types: Mapping[str, NodeType] | None) -> dict[str, NodeType]:
    types = dict(node_types or {})
    for key, kind in types.items():
        if not isinstance(key, str) or not key.isidentifier() or not isinstance(kind, NodeType):
            raise GraphConfigError(
                f"node_types= maps type names to NodeType objects, e.g. "
                f"agent_node_types(models={{'main': model}}) from nodestep.agents; got "
                f"{key!r}: {kind!r}."
            )
        if key in ("function", "update"):
            raise GraphConfigError(
                f"node_types= cannot replace the built-in node type {key!r}; give the type "
                f"another name."
            )
    return types


def _files(paths: Any) -> list[Path]:
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files: list[Path] = []
    for p in map(Path, given):
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml"))
        elif p.exists():
            files.append(p)
        else:
            raise GraphConfigError(f"Manifest path '{p}' does not exist; check the path.")
    if not files:
        shown = ", ".join(str(p) for p in given)
        raise GraphConfigError(f"No manifest (*.yaml, *.yml) found in {shown}.")
    return files


@dataclass
class _NodeSpec:
    doc: Y
    name: Y
    node: Node
    edges: list[Y] = field(default_factory=list)


class _Spec:
    """What the manifests say, checked piece by piece into ``problems``."""

    def __init__(
        self,
        problems: Problems,
        importer: Importer,
        functions: dict[str, Any],
        node_types: dict[str, NodeType],
    ) -> None:
        self.problems = problems
        self.node_types = node_types
        self.importer = importer
        self.functions = functions
        self.name = "graph"
        self.state: Any = None
        self.context: Any = None
        self.start = Y(None, "?", 1, 1)
        self.max_steps = 25
        self.timeout: float | None = None
        self.middleware: list[Middleware] = []
        self.nodes: dict[str, Node] = {}

    def graph(self, options: dict[str, Any]) -> Graph[Any]:
        """Return the graph the header describes, without its flow; ``options``: the
        caller's ``Graph`` options, whose middleware comes after the manifest's."""
        hooks = [*self.middleware, *options.pop("middleware", ())]
        return Graph(
            self.state,
            name=self.name,
            max_steps=self.max_steps,
            timeout=self.timeout,
            middleware=hooks,
            **options,
        )

    def read_header(self, doc: Y) -> None:
        data = doc.value
        for key in ("name", "state", "start"):
            if key not in data:
                self.problems.add(doc, f"the Graph document needs '{key}'")
        if "name" in data:
            self.name = self._text(data["name"], "the graph name") or "graph"
        if "state" in data:
            self.state = self._model(data["state"], "the state class")
        if "context" in data:
            self.context = self._model(data["context"], "the context type")
        if "start" in data:
            start = data["start"]
            if isinstance(start.value, str):
                self.start = start
            else:  # a list or mapping: unhashable, and never a node's name
                got = plain(start)
                self.problems.add(
                    start, f"start takes the name of a node, e.g. 'start: work', got {got!r}"
                )
        if "max_steps" in data:
            steps = data["max_steps"]
            if (
                isinstance(steps.value, int)
                and not isinstance(steps.value, bool)
                and steps.value > 0
            ):
                self.max_steps = steps.value
            else:
                self.problems.add(
                    steps, f"max_steps takes a whole number of at least 1, got {steps.value!r}"
                )
        if "timeout" in data:
            problem = SETTINGS[0].check(data["timeout"].value)
            if problem:
                self.problems.add(data["timeout"], f"timeout {problem}")
            else:
                self.timeout = float(data["timeout"].value)
        if "middleware" in data:
            self.middleware = self._middleware(data["middleware"])

    def _middleware(self, y: Y) -> list[Middleware]:
        """Return the middleware a Graph document names: each a ``Middleware`` subclass,
        made without arguments, or a ``Middleware`` instance, by import path."""
        if not isinstance(y.value, list):
            self.problems.add(
                y,
                f"middleware takes a list of import paths, e.g. [app.hooks:Audit], got "
                f"{plain(y)!r}",
            )
            return []
        made: list[Middleware] = []
        for item in y.value:
            found = self.importer.resolve(item, "middleware", accept=(Middleware,))
            if isinstance(found, Middleware):
                made.append(found)
            elif isinstance(found, type) and issubclass(found, Middleware):
                try:
                    made.append(found())
                except Exception as error:  # its own __init__: any error means it cannot be made
                    self.problems.add(
                        item,
                        f"middleware '{item.value}' cannot be made without arguments "
                        f"({error!r}); name an instance made in its module, or pass it with "
                        f"load_graph(..., middleware=[...])",
                    )
            elif found is not None:
                self.problems.add(
                    item, f"middleware '{item.value}' is not a Middleware subclass or instance"
                )
        return made

    def _text(self, y: Y, what: str) -> str | None:
        if isinstance(y.value, str) and y.value.strip():
            return y.value
        self.problems.add(y, f"{what} must be a non-blank string, got {y.value!r}")
        return None

    def _model(self, y: Y, what: str) -> Any:
        cls = self.importer.resolve(y, what)
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            self.problems.add(
                y, f"{what} '{y.value}' is not a pydantic model class (a BaseState subclass)"
            )
            return None
        return cls

    def read_node(self, doc: Y) -> _NodeSpec:
        if not isinstance(doc.value, dict):
            self.problems.add(
                doc,
                "a node is a mapping with a name, e.g. {name: classify, function: "
                "app.nodes:classify}",
            )
            return _NodeSpec(doc, doc, _placeholder())
        data = doc.value
        keys = NODE_KEYS if "kind" not in data else ("nodestep", "kind", *NODE_KEYS)
        declared = data.get("type")
        kind = declared.value if declared is not None else None
        if isinstance(kind, str) and kind in self.node_types:
            keys = (*keys, *self.node_types[kind].keys)
        known_keys(doc, keys, "a node", self.problems)
        name_y = data.get("name", Y(None, doc.file, doc.line, doc.column))
        name = self._text(name_y, "a node's name") if "name" in data else None
        if name is None and "name" not in data:
            self.problems.add(doc, "a node needs a 'name'")
        kwargs = node_keywords(data, self.importer, self.problems)
        built = make_node(
            name or "unnamed",
            data,
            kwargs,
            self.importer,
            self.problems,
            self.state,
            self.node_types,
        )
        if built is not None and built.state_check is not None and self.state is not None:
            # A node made by a library says what it needs of the state (a model node: a
            # messages field); asked here, the answer joins the other problems, placed.
            problem = built.state_check(self.state)
            if problem:
                self.problems.add(data.get("type") or name_y, problem)
        edges = data.get("edges")
        if edges is not None and not isinstance(edges.value, list):
            self.problems.add(edges, "'edges' is a list of {target: ..., when: ...}")
            edges = None
        return _NodeSpec(doc, name_y, built or _placeholder(), edges.value if edges else [])

    def check_names(self, specs: list[_NodeSpec], header: Y | None) -> None:
        for spec in specs:
            name = spec.name.value
            if not isinstance(name, str):
                continue
            if name in self.nodes:
                first = next(s for s in specs if s.name.value == name)
                self.problems.add(
                    spec.name,
                    f"a second node named '{name}' (the first is at {first.name.at}); give "
                    f"each node its own name",
                )
            else:
                self.nodes[name] = spec.node
        start = self.start.value
        if header is not None and isinstance(start, str) and start not in self.nodes:
            self.problems.add(
                self.start,
                f"the start node '{start}' is not a node of the manifests ({self._known()})",
            )

    def _known(self) -> str:
        return "nodes: " + (", ".join(sorted(self.nodes)) or "none")

    def edges(self, spec: _NodeSpec) -> Node | Terminal | When:
        """Return what follows a node: a target, ``END`` or a chain of ``when``."""
        links: list[tuple[Condition, Node | Terminal, Y]] = []
        fallback: Node | Terminal | None = None
        for edge in spec.edges:
            if not isinstance(edge.value, dict) or "target" not in edge.value:
                self.problems.add(
                    edge, "an edge is a mapping with a 'target' and, optionally, 'when'"
                )
                continue
            known_keys(edge, EDGE_KEYS, "an edge", self.problems)
            if fallback is not None:
                self.problems.add(
                    edge,
                    "this edge comes after an edge without 'when', which always applies, so "
                    "it never runs; move it up or remove it",
                )
            target = self._target(edge.value["target"])
            condition = edge.value.get("when")
            if condition is None:
                fallback = target
            elif (parsed := self._condition(condition)) is not None:
                links.append((parsed, target, condition))
        if not spec.edges and not spec.node.goto:
            self.problems.add(
                spec.doc,
                f"node '{spec.name.value}' has no edges; add one, e.g. edges: [{{target: END}}]",
            )
        route: Node | Terminal | When = fallback if fallback is not None else END
        for parsed, target, _ in reversed(links):
            route = when(
                parsed, target, otherwise=route, context=self.context, functions=self.functions
            )
        return route

    def _target(self, y: Y) -> Node | Terminal:
        if y.value == "END":
            return END
        found = self.nodes.get(y.value) if isinstance(y.value, str) else None
        if found is None:
            self.problems.add(
                y, f"unknown target {y.value!r}; a target is a node name or END ({self._known()})"
            )
            return END
        return found

    def _condition(self, y: Y) -> Condition | None:
        if not isinstance(y.value, str):
            self.problems.add(y, f"'when' takes a condition string, got {y.value!r}")
            return None
        exact = bool(y.positions) or not y.value  # an empty text has no place inside
        source = Source(y.file, y.line, y.column + (1 if y.quoted else 0), y.positions, exact)
        try:
            condition = Condition(y.value, source)
            if self.state is not None:
                condition.compile(self.state, context=self.context, functions=self.functions)
        except ConditionError as error:
            self.problems.items.append(str(error))
            return None
        return condition


def _placeholder() -> Node:
    """A stand-in node for one that could not be built; the load fails before it runs."""

    def unbuilt(state: Any) -> None:
        return None

    return node(unbuilt)
