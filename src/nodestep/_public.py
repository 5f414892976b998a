"""The public faces' two chores: give each public object its home, and forward moved names.

Every public name lives in a private module and is re-exported by a face (``nodestep``,
``nodestep.store``, ``nodestep.agents``, ...). ``publish`` makes the face the object's
``__module__``, so that ``repr``, ``help()``, tracebacks, pickles and the API reference name
the path users import from, never a private one (httpx does the same). A class's annotations
written as text (``from __future__ import annotations``) are resolved in its own module
first: ``typing.get_type_hints`` and pydantic, for a user's state with a field of such a
type, look the names up in the module ``__module__`` names, and a face holds no ``Any``.

``forward`` keeps an import path that 0.1 documented working for one more release: the
name still resolves, with a ``DeprecationWarning`` that names its new home.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ForwardRef

__all__ = ["REMOVED_IN", "forward", "publish"]

REMOVED_IN = "0.3"
"""The release that drops the import paths ``forward`` keeps working."""


def publish(face: str, names: Iterable[str], namespace: Mapping[str, Any]) -> None:
    """Make ``face`` the ``__module__`` of each class and function ``names`` lists.

    An object that already has a public home (a name a more specific face exports, such
    as a store re-exported at the top level) keeps it: its home is the face that owns it.

    Args:
        face: The face's module name, e.g. ``"nodestep.store"``.
        names: The face's ``__all__``.
        namespace: The face's globals.
    """
    for name in names:
        obj = namespace[name]
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants, aliases and instances have no home of their own
        if _is_private(obj.__module__):
            if inspect.isclass(obj):
                _resolve_annotations(obj)
            obj.__module__ = face


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _resolve_annotations(cls: type) -> None:
    """Replace the class's own annotations written as text by the objects they name.

    Both places hold them: ``__annotations__`` and, for a dataclass, each field's ``type``.
    A name its module imports only for type checkers stays text, as it was.
    """
    names = {**vars(sys.modules[cls.__module__]), **vars(cls)}

    def resolved(value: Any) -> Any:
        text = value.__forward_arg__ if isinstance(value, ForwardRef) else value
        if not isinstance(text, str):
            return value
        try:
            return eval(text, names)  # annotation text that nodestep itself wrote
        except NameError:
            return value

    for key, value in inspect.get_annotations(cls).items():
        cls.__annotations__[key] = resolved(value)
    for field in getattr(cls, "__dataclass_fields__", {}).values():
        field.type = resolved(field.type)


def forward(old: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that resolves moved names, with a warning.

    Args:
        old: The module whose names moved, e.g. ``"nodestep"``.
        moved: Each moved name and the face that is its home now.

    Returns:
        The function to bind as the module's ``__getattr__``.
    """

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{name} moved from {old} to {home}: import it as 'from {home} import {name}'. "
            f"The old path works until nodestep {REMOVED_IN}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
