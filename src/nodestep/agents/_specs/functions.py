"""What a ``func:`` string names, and the functions a ``when:`` may call.

Lookup order, the first that answers wins:

1. ``functions=`` as a mapping: the exact string (``main.get_user_by_name``);
2. ``functions=`` as a module: its attribute named by the string's last dotted part;
3. an import of the dotted path (``package.module.function``, or
   ``package.module:function``), under the agent's ``allowed_packages``.

A string that resolves to nothing callable is a load problem at its file and line, never
a tool that silently does nothing.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nodestep._declarative.documents import plain
from nodestep._declarative.imports import Importer
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._errors import GraphConfigError

__all__ = ["Functions", "check_functions"]

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

FunctionsArg = Mapping[str, Callable[..., Any]] | types.ModuleType | None


def check_functions(functions: Any) -> Mapping[str, Callable[..., Any]] | types.ModuleType:
    """Return ``functions=`` checked: a mapping of strings to callables, or a module.

    Raises:
        GraphConfigError: anything else, or a mapping with a key or value that is not one.
    """
    if functions is None:
        return {}
    if isinstance(functions, types.ModuleType):
        return functions
    if not isinstance(functions, Mapping):
        raise GraphConfigError(
            f"Agent(functions=...) takes a dict of func strings to callables, e.g. "
            f"{{'main.get_user': get_user}}, or a module; got {type(functions).__name__}."
        )
    for key, fn in functions.items():
        if not isinstance(key, str) or not callable(fn):
            raise GraphConfigError(
                f"Agent(functions=...) maps func strings to callables; got {key!r}: {fn!r}."
            )
    return dict(functions)


class Functions:
    """Resolves ``func:`` strings and a condition's function names for one load.

    Args:
        functions: ``functions=``, checked by ``check_functions``.
        allowed: ``allowed_packages=``: the packages an import may come from, or ``None``.
        problems: Where problems go.
    """

    def __init__(
        self,
        functions: Mapping[str, Callable[..., Any]] | types.ModuleType,
        allowed: Sequence[str] | None,
        problems: Problems,
    ) -> None:
        self.given = functions
        self.problems = problems
        self.importer = Importer(allowed, problems)

    def registered(self, text: str) -> Callable[..., Any] | None:
        """Return the function ``functions=`` gives for ``text``, or ``None``."""
        if isinstance(self.given, types.ModuleType):
            last = text.replace(":", ".").rpartition(".")[2]
            found = getattr(self.given, last, None) if last and not last.startswith("_") else None
            return found if callable(found) else None
        return self.given.get(text)

    def resolve(self, where: Y, what: str) -> Callable[..., Any] | None:
        """Return the callable ``where`` names, or ``None`` after adding a problem."""
        text = where.value
        if not isinstance(text, str) or not text.strip():
            shown = plain(where)  # as written: a list's items are the loader's Y wrappers
            self.problems.add(where, f"{what} must be a function's dotted path, got {shown!r}")
            return None
        found = self.registered(text)
        if found is not None:
            return found
        path = text if ":" in text else _colon_form(text)
        if path is None:
            self.problems.add(
                where,
                f"{what} '{text}' does not resolve: it is not in functions= and not an "
                f"importable 'module.function' path; pass functions={{'{text}': fn}} or "
                f"write the module too, e.g. 'app.tools.{text}'",
            )
            return None
        before = len(self.problems.items)
        obj = self.importer.resolve(Y(path, where.file, where.line, where.column), what)
        if obj is None:
            # The importer names the path in its own form (module:name); show it as written.
            for i in range(before, len(self.problems.items)):
                self.problems.items[i] = self.problems.items[i].replace(f"'{path}'", f"'{text}'")
            return None
        if not callable(obj):
            self.problems.add(where, f"{what} '{text}' names {type(obj).__name__}, not a function")
            return None
        return obj  # type: ignore[no-any-return]

    def for_condition(
        self, refs: Sequence[str], calls: Sequence[str]
    ) -> dict[str, Callable[..., Any]]:
        """Return the functions a condition may call, by the names it writes them with.

        ``refs`` are bare references (``business_rules.validate``): a function that takes
        no argument (Liman's style) is called without one, others get the call's context,
        as a condition's function gets the state. ``calls`` are names written with
        arguments (``rules.check(tier)``), called with those.
        """
        out: dict[str, Callable[..., Any]] = {}
        for name in calls:
            fn = self.registered(name)
            if fn is not None:
                out[name] = fn
        for name in refs:
            fn = self.registered(name)
            if fn is not None:
                out[name] = _one_argument(fn)
        return out


def _colon_form(text: str) -> str | None:
    if not _DOTTED.match(text) or "." not in text:
        return None
    module, _, name = text.rpartition(".")
    return f"{module}:{name}"


def _one_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    try:
        inspect.signature(fn).bind(None)
    except TypeError:
        return lambda context: fn()
    except ValueError:  # a builtin without a signature: called as written
        return fn
    return fn
