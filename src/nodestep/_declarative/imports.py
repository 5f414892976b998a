"""Resolve the import paths a manifest names, within the packages it may use."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from types import FunctionType, ModuleType
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
    set, only modules in those packages are imported at all, and a path resolves only to
    a function or class *defined* in one of them (its ``__module__``): a name the module
    imported from elsewhere (``app.nodes:getenv``) is refused, and the path is never
    walked through another module (``app.nodes:os.environ.get``). Resolving runs no code
    but the import: names are read from the module's and classes' own dicts.

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

    def resolve(self, where: Y, what: str, accept: tuple[type, ...] = ()) -> Any:
        """Return the object at the path in ``where``, or ``None`` after adding a problem.

        Args:
            where: The path, where it was written.
            what: What the path is for, for messages ("the function of node 'a'").
            accept: Classes whose instances the path may name besides functions and
                classes (a ``Tool``, say). Such an object has no module of its own, so it
                counts as defined in the module the path names.
        """
        path = where.value
        if not is_import_path(path):
            self.problems.add(
                where,
                f"{what} must be an import path such as 'app.nodes:classify' (module, a "
                f"colon, then the name), got {path!r}",
            )
            return None
        module, _, qualname = path.partition(":")
        if not self._allows(module):
            self.problems.add(
                where,
                f"{what} '{path}' is outside the allowed packages "
                f"({', '.join(self.allowed or ())}); move the code into one of them, or add "
                f"its package to allowed_packages",
            )
            return None
        try:
            found: Any = importlib.import_module(module)
        except Exception as error:
            # Any error of the module's own code counts: the path cannot be used.
            self.problems.add(
                where, f"{what} '{path}': importing '{module}' failed ({error!r}); fix the path"
            )
            return None
        problem = self._walk(found, module, qualname, accept)
        if isinstance(problem, _Found):
            return problem.obj
        self.problems.add(where, f"{what} '{path}'{problem}")
        return None

    def _walk(
        self, module: Any, name: str, qualname: str, accept: tuple[type, ...] = ()
    ) -> _Found | str:
        """Find ``qualname`` in ``module`` by reading dicts only; return it, or a problem.

        Why dicts: ``getattr`` runs code (a module's ``__getattr__``, a property's getter),
        and a path must run nothing but the import. The first name is looked up in the
        module's own namespace, every further one in a class's (a nested class, a static
        method), never through another module or an instance.
        """
        obj: Any = module
        walked = name
        for part in qualname.split("."):
            if part.startswith("__"):
                return " names a private dunder attribute"
            if obj is not module and not _is_class(obj):
                return (
                    f" walks through '{walked}', which is {_kind_of(obj)}; a manifest names a "
                    f"function or class defined in a module (package.module:name), or a "
                    f"class's nested class or static method (package.module:Class.name)"
                )
            try:
                obj = inspect.getattr_static(obj, part)
            except AttributeError:
                return f": '{walked}' has no '{part}'; fix the name"
            if type(obj) is staticmethod:
                obj = obj.__func__
            walked = f"{walked}:{part}" if walked == name else f"{walked}.{part}"
        return self._kind(obj, walked, accept)

    def _kind(self, obj: Any, walked: str, accept: tuple[type, ...]) -> _Found | str:
        # type() rather than isinstance(): isinstance reads an object's __class__, which a
        # property can answer, and resolving runs no code of the module.
        if type(obj) is Node:
            return self._made_node(obj, walked)
        if accept and issubclass(type(obj), accept):
            return _Found(obj)
        if not (type(obj) is FunctionType or _is_class(obj)):
            return (
                f" names '{walked}', which is {_kind_of(obj)}; a manifest names a function "
                f"or class defined in a module (def or class), or a node made with @node, "
                f"model_node or tool_node; never another object"
            )
        # A class's own dict: a metaclass property named __module__ would run code.
        home = vars(obj).get("__module__") if _is_class(obj) else obj.__module__
        if not self._allows(home):
            return (
                f" is defined in '{home}', outside the allowed packages "
                f"({', '.join(self.allowed or ())}); name it where it is defined, in an allowed "
                f"package, or add its package to allowed_packages"
            )
        return _Found(obj)

    def _made_node(self, made: Node, walked: str) -> _Found | str:
        """Accept a node made in Python (``@node``, ``model_node``), where its code may run.

        Why its function's module: that is the code the node runs. A node nodestep made
        (``model_node``, ``tool_node``) runs nodestep's own code, which is always allowed.
        """
        home = getattr(made.fn, "__module__", None)
        if self._allows(home) or (isinstance(home, str) and home.startswith("nodestep.")):
            return _Found(made)
        return (
            f" is a node whose function is defined in '{home}', outside the allowed packages "
            f"({', '.join(self.allowed or ())}); make the node in an allowed package, or add "
            f"its package to allowed_packages"
        )

    def _allows(self, module: Any) -> bool:
        """Tell whether code of ``module`` (a module's name) may be used."""
        if self.allowed is None:
            return True
        return isinstance(module, str) and any(
            module == p or module.startswith(p + ".") for p in self.allowed
        )


@dataclass(frozen=True, slots=True)
class _Found:
    obj: Any


def _is_class(obj: Any) -> bool:
    return issubclass(type(obj), type)


def _kind_of(obj: Any) -> str:
    return "a module" if issubclass(type(obj), ModuleType) else f"a {type(obj).__name__} object"
