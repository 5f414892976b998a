"""Resolve the import paths a manifest names, within the packages it may use."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from nodestep._declarative.format import is_import_path
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import Node

__all__ = ["Importer"]


class Importer:
    """Import ``package.module:name`` paths, refusing packages outside ``allowed``.

    Why the allow-list: importing a module runs its code, so a manifest from a less
    trusted place could run any installed module's import-time code. With ``allowed``
    set, only modules in those packages are imported at all.

    Args:
        allowed: Package names a path may start with (``"app"`` allows ``app`` and
            ``app.nodes``), or ``None`` for any.
        problems: Where problems go.
    """

    def __init__(self, allowed: Sequence[str] | None, problems: Problems) -> None:
        if allowed is not None and (
            isinstance(allowed, str) or not all(isinstance(p, str) and p for p in allowed)
        ):
            raise GraphConfigError(
                f"allowed_packages takes a list of package names, e.g. ['app'], got {allowed!r}."
            )
        self.allowed = None if allowed is None else tuple(allowed)
        self.problems = problems

    def resolve(self, where: Y, what: str) -> Any:
        """Return the object at the path in ``where``, or ``None`` after adding a problem."""
        path = where.value
        if not is_import_path(path):
            self.problems.add(
                where,
                f"{what} must be an import path such as 'app.nodes:classify' (module, a "
                f"colon, then the name), got {path!r}",
            )
            return None
        module, _, qualname = path.partition(":")
        if self.allowed is not None and not any(
            module == p or module.startswith(p + ".") for p in self.allowed
        ):
            self.problems.add(
                where,
                f"{what} '{path}' is outside the allowed packages ({', '.join(self.allowed)}); "
                f"move the code into one of them, or add its package to allowed_packages",
            )
            return None
        try:
            obj: Any = importlib.import_module(module)
        except Exception as error:
            # Any error of the module's own code counts: the path cannot be used.
            self.problems.add(
                where, f"{what} '{path}': importing '{module}' failed ({error!r}); fix the path"
            )
            return None
        for part in qualname.split("."):
            if part.startswith("__"):
                self.problems.add(where, f"{what} '{path}' names a private dunder attribute")
                return None
            try:
                obj = getattr(obj, part)
            except AttributeError:
                self.problems.add(
                    where, f"{what} '{path}': '{module}' has no '{qualname}'; fix the name"
                )
                return None
        if isinstance(obj, Node):
            self.problems.add(
                where,
                f"{what} '{path}' is a node already made with @node or node(); a manifest "
                f"names the plain function and sets the node's name and options itself: "
                f"point at the function, or keep this node in a Python-built graph",
            )
            return None
        return obj
