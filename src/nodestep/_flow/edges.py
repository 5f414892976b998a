"""Edges: ``START``, ``END`` and ``source >> target``, the data a flow is declared with."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

__all__ = ["END", "START", "Chain", "Edge", "Terminal", "label", "not_a_node"]


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

    def __rrshift__(self, source: Any) -> Edge:
        # ``[b, c] >> END``: a list has no ``>>`` of its own, so Python asks END.
        if isinstance(source, list | tuple):
            return Edge(source, self)
        raise TypeError(not_a_node(source, f"An edge to {self.name}") + ".")

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


START = Terminal("START")
"""The start of a flow: ``START >> first_node``."""

END = Terminal("END")
"""The end of a flow: ``last_node >> END``; a node may also return ``END``."""


def _ends(x: Any) -> Any:
    """Return a list of nodes as a tuple (edges are values); anything else as it is."""
    return tuple(x) if isinstance(x, list) else x


def _label_end(x: Any) -> str:
    if isinstance(x, tuple):
        return "[" + ", ".join(label(n) for n in x) + "]"
    return label(x)


@dataclass(frozen=True, slots=True)
class Edge:
    """``source >> target``: what runs after ``source``.

    ``a >> [b, c]`` (a tuple target) runs ``b`` and ``c`` after ``a``; ``[b, c] >> d`` (a
    tuple source) is a join: ``d`` runs once both ``b`` and ``c`` have run.
    """

    source: Any
    target: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", _ends(self.source))
        object.__setattr__(self, "target", _ends(self.target))

    def __rshift__(self, target: Any) -> Chain:
        return Chain((self,)).__rshift__(target)

    def __repr__(self) -> str:
        return f"{_label_end(self.source)} >> {_label_end(self.target)}"


@dataclass(frozen=True, slots=True)
class Chain:
    """``START >> a >> b >> END``: edges written one after another, each from the last target.

    ``flow()`` takes a chain as the edges it holds.
    """

    edges: tuple[Edge, ...]

    def __rshift__(self, target: Any) -> Chain:
        last = self.edges[-1].target
        if isinstance(last, Terminal) or hasattr(last, "targets"):  # END, when(), branch()
            raise TypeError(
                f"A chain cannot go on after {_label_end(last)}: only a node or a list of "
                f"nodes leads on. End the chain there and start the next edge on its own, "
                f"e.g. flow(..., {_label_end(last)}, node_a >> node_b)."
            )
        return Chain((*self.edges, Edge(last, target)))

    def __repr__(self) -> str:
        return " ; ".join(repr(e) for e in self.edges)
