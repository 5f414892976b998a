"""The built-in functions of conditions, written ``$name(...)``.

=====================  =====================================================================
``$is_error('Name')``  the node failed with an exception of that class or a subclass (its
                       class name, or a base class's); several names match any of them;
                       ``$is_error()`` matches any failure. Only this makes an edge take
                       a node's failure (see error routes).
``$exists(name)``      the value is there: not null, and a key the dict has.
``$len(x)``            the length of a string, list or dict; 0 for null.
``$lower(s)``          ``s`` in lower case (null stays null).
``$upper(s)``          ``s`` in upper case (null stays null).
=====================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodestep._conditions.env import Env, EvaluationProblem
from nodestep._conditions.syntax import Call, Expr, Literal, Name, Problem
from nodestep._conditions.types import BOOL, NULL, NUMBER, STR, Ty

__all__ = ["NAMES", "compile_builtin", "error_matches"]

NAMES = ("exists", "is_error", "len", "lower", "upper")
"""The built-ins, for messages and docs."""

Fn = Callable[[Env], Any]
CompileArg = Callable[[Expr], tuple[Ty, Fn]]


def compile_builtin(tree: Call, compile_arg: CompileArg) -> tuple[Ty, Fn]:
    """Return the type and closure of ``$name(args)``.

    Raises:
        Problem: an unknown built-in, or arguments it does not take.
    """
    args = tree.args or ()
    name = tree.name
    if name == "is_error":
        return BOOL, _is_error(tree, args)
    if name not in NAMES:
        shown = ", ".join(f"${n}" for n in NAMES)
        raise Problem(f"unknown built-in '${name}'; the built-ins are {shown}", tree.pos)
    if len(args) != 1:
        raise Problem(f"${name}(...) takes one argument, got {len(args)}", tree.pos)
    ty, arg = compile_arg(args[0])
    if name == "exists":
        if not isinstance(args[0], Name):
            raise Problem("$exists(...) takes a name, e.g. $exists(user.email)", args[0].pos)
        return BOOL, lambda env: arg(env) is not None
    if name == "len":
        _need(ty, {"str", "list", "dict"}, "$len", "a string, list or dict", args[0])
        return NUMBER, lambda env: _length(arg(env))
    _need(ty, {"str"}, f"${name}", "a string", args[0])
    method = str.lower if name == "lower" else str.upper
    return STR | NULL, lambda env: _string(method, arg(env), name)


def _need(ty: Ty, kinds: set[str], name: str, what: str, arg: Expr) -> None:
    if not ty.is_any and not ty.known() & kinds:
        raise Problem(f"{name}(...) takes {what}, but this is {ty.describe()}", arg.pos)


def _is_error(tree: Call, args: tuple[Expr, ...]) -> Fn:
    names: list[str] = []
    for arg in args:
        if not (isinstance(arg, Literal) and isinstance(arg.value, str) and arg.value):
            raise Problem(
                "$is_error(...) takes exception class names as strings, e.g. "
                "$is_error('TimeoutError')",
                arg.pos,
            )
        names.append(arg.value)
    wanted = frozenset(names)
    return lambda env: error_matches(env.error, wanted)


def error_matches(error: BaseException | None, names: frozenset[str]) -> bool:
    """Tell whether ``error`` is of a class named in ``names`` (or any, when empty)."""
    if error is None:
        return False
    if not names:
        return True
    return any(cls.__name__ in names for cls in type(error).__mro__)


def _length(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str | list | tuple | dict | set | frozenset):
        return len(value)
    raise EvaluationProblem(f"$len(...) takes a string, list or dict, got {value!r}")


def _string(method: Callable[[str], str], value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise EvaluationProblem(f"${name}(...) takes a string, got {value!r}")
    return method(value)
