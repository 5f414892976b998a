"""Edges: ``START``, ``END`` and ``source >> target``, the data a flow is declared with."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = ["END", "START", "Edge", "Terminal", "label", "not_a_node"]


def label(x: Any) -> str:
    """Return how ``x`` is named in messages and drawings: a node's or terminal's name."""
    describe = getattr(x, "describe", None)
    if callable(describe):
        return str(describe())
    name = getattr(x, "name", None)
    return name if isinstance(name, str) else repr(x)


def not_a_node(x: Any, where: str) -> str:
    """Say what is wrong with ``x`` where a node belongs, with the fix."""
    if inspect.isfunction(x) or inspect.ismethod(x):
        return (
            f"{where} uses the plain function '{x.__name__}'; decorate it with @node (or wrap "
            f"it: node({x.__name__})) to use it in a flow"
        )
    return f"{where} uses {x!r}, which is not a node; use a function decorated with @node"


class Terminal:
    """``START`` or ``END``: the two ends of a flow."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __rshift__(self, target: Any) -> Edge:
        return Edge(self, target)

    def __rrshift__(self, source: Any) -> NoReturn:
        raise TypeError(not_a_node(source, f"An edge to {self.name}") + ".")

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


START = Terminal("START")
"""The start of a flow: ``START >> first_node``."""

END = Terminal("END")
"""The end of a flow: ``last_node >> END``; a node may also return ``END``."""


@dataclass(frozen=True, slots=True)
class Edge:
    """``source >> target``: what runs after ``source``."""

    source: Any
    target: Any

    def __repr__(self) -> str:
        return f"{label(self.source)} >> {label(self.target)}"
