"""Node types a layer above the loader adds to manifests: ``type: llm``, ``type: tool``.

The loader knows two node types of its own (``function`` and ``update``). A library built
on it (``nodestep.agents``) makes nodes the loader cannot know, so it hands the loader a
``NodeType`` per type through ``load_graph(node_types=...)``: the keys the type reads, a
function that builds the node from them, and the condition functions that route on its
output. The dependency stays one way: the loader calls what it is given and never imports
the layer that gave it, and a manifest can use a type only when the caller passed it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from nodestep._declarative.documents import plain
from nodestep._declarative.imports import Importer
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._flow.nodes import Node

__all__ = ["NodeDeclaration", "NodeType"]


@dataclass(frozen=True, slots=True)
class NodeType:
    """A node type a manifest declares with ``type: <name>``, given to ``load_graph``.

    Args:
        build: Makes the node from its declaration. It returns a new ``Node`` each call
            (the loader gives it the manifest's name and settings), or ``None`` after
            reporting each problem with ``NodeDeclaration.problem``.
        keys: The manifest keys of the type, besides the keys every node has (``name``,
            ``type``, ``edges``, the settings).
        required: The keys a declaration of the type must hold.
        functions: Condition functions that come with the type, by name (e.g.
            ``has_tool_calls`` to route after a model node); a function passed to
            ``load_graph(functions=...)`` under the same name wins.
        summary: One line on what the type is, for messages.
        schema: The JSON Schema of each key, for ``manifest_json_schema(node_types=...)``;
            a key without one takes any value there.
    """

    build: Callable[[NodeDeclaration], Node | None]
    keys: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    functions: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    summary: str = ""
    schema: Mapping[str, Any] = field(default_factory=dict)


class NodeDeclaration:
    """One manifest node of a ``NodeType``, as its ``build`` reads it.

    Every value keeps its place in the file, so a builder's problem is reported at the
    file, line and column of the key (or list item) it is about, with the loader's other
    problems, all at once.

    Attributes:
        name: The node's name.
        type: The type's name, as written.
        state: The graph's state class, or ``None`` when the manifest's could not be read.
        failed: Whether a problem was reported; the loader then uses no node built.
    """

    def __init__(
        self,
        name: str,
        type_name: str,
        data: dict[str, Y],
        state: type[BaseModel] | None,
        importer: Importer,
        problems: Problems,
    ) -> None:
        self.name = name
        self.type = type_name
        self.state = state
        self._data = data
        self._importer = importer
        self._problems = problems
        self.failed = False

    def has(self, key: str) -> bool:
        """Tell whether the declaration holds ``key``."""
        return key in self._data

    def value(self, key: str, default: Any = None) -> Any:
        """Return the plain value of ``key`` (lists and mappings included), or ``default``."""
        y = self._data.get(key)
        return default if y is None else plain(y)

    def problem(self, message: str, key: str | None = None, index: int | None = None) -> None:
        """Report a problem at ``key`` (its item ``index`` for a list), or at the node.

        ``message`` says what is wrong, the value, and the fix; the loader adds the place.
        """
        self.failed = True
        self._problems.add(self._where(key, index), message)

    def resolve(
        self, key: str, what: str, index: int | None = None, accept: tuple[type, ...] = ()
    ) -> Any:
        """Import the object at the path in ``key`` (or its item ``index``), or return ``None``.

        The path obeys the manifest's rules (``allowed_packages``, resolved without running
        code but the import): it names a function or class, or an object of one of the
        classes in ``accept`` (a ``Tool``, say) defined in an allowed package.
        """
        found = self._importer.resolve(self._where(key, index), what, accept)
        if found is None:
            self.failed = True
        return found

    def _where(self, key: str | None, index: int | None) -> Y:
        node = self._data.get("name") or next(iter(self._data.values()))
        y = self._data.get(key, node) if key is not None else node
        if index is not None and isinstance(y.value, list) and index < len(y.value):
            item: Y = y.value[index]
            return item
        return y
