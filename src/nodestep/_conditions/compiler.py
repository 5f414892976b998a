"""Check a condition's tree against the state's types and turn it into plain closures.

One pass does both: each node of the tree yields its static type (to refuse a name that
does not exist or a comparison that can never hold, at load time) and a closure that
computes its value from an ``Env``. Evaluating a condition is then a handful of Python
calls, with no parsing, no ``eval`` and no attribute access beyond declared fields.

How a name resolves (one rule, in this order):

1. ``state.x``, ``context.x`` and ``output.x`` say where ``x`` is (unless the state has a
   field of that name);
2. A name registered as a function is that function, called with the state
   (``business_rules.check``);
3. else a bare ``x`` is a field of the state;
4. else a field of the declared context type.
"""

from __future__ import annotations

import inspect
import operator
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nodestep._conditions import builtins
from nodestep._conditions.env import Env, EvaluationProblem, read_context, read_field
from nodestep._conditions.kinds import contains, equal, fits
from nodestep._conditions.syntax import (
    BoolOp,
    Call,
    Compare,
    Expr,
    ListExpr,
    Literal,
    Name,
    Not,
    Problem,
)
from nodestep._conditions.types import (
    ANY,
    BOOL,
    NULL,
    STR,
    Ty,
    fields_of,
    member,
    of_annotation,
    of_value,
)

__all__ = ["Fn", "Scope", "checked_truth", "compile_tree"]

Fn = Callable[[Env], Any]


@dataclass(frozen=True, slots=True)
class Scope:
    """What names a condition may read: the state, the context type, the functions."""

    state: Ty
    context: Ty
    functions: Mapping[str, Callable[..., Any]]
    context_declared: bool


def compile_tree(tree: Expr, scope: Scope) -> tuple[Ty, Fn]:
    """Return the static type of ``tree`` and the closure that evaluates it.

    Raises:
        Problem: an unknown name or function, or types that cannot be compared.
    """
    if isinstance(tree, Literal):
        value = tree.value
        return of_value(value), lambda env: value
    if isinstance(tree, ListExpr):
        compiled = [compile_tree(item, scope) for item in tree.items]
        fns = [fn for _, fn in compiled]
        items: Ty | None = None
        for ty, _ in compiled:
            items = ty if items is None else items | ty
        return Ty(frozenset({"list"}), items=items), lambda env: [f(env) for f in fns]
    if isinstance(tree, Name):
        return _name(tree, scope)
    if isinstance(tree, Call):
        return _call(tree, scope)
    if isinstance(tree, Not):
        inner = _truth(tree.operand, scope, _negation(tree))
        return BOOL, lambda env: not inner(env)
    if isinstance(tree, BoolOp):
        return BOOL, _bool_op(tree, scope)
    return BOOL, _compare(tree, scope)


def _negation(tree: Not) -> str:
    if tree.word == "!":
        return "'!' (which negates only the operand after it: write !(a == b) or a != b)"
    return "'not'"


def _truth(tree: Expr, scope: Scope, where: str) -> Fn:
    """Compile an operand of and/or/not, or a whole condition: it must be true/false."""
    ty, fn = compile_tree(tree, scope)
    if not ty.is_any and "bool" not in ty.kinds:
        raise Problem(
            f"{where} needs true/false, but this is {ty.describe()}; compare it (x == ...) or "
            f"test it with $exists(x) or $len(x) > 0",
            tree.pos,
        )
    return checked_truth(ty, fn, where.split(" (", 1)[0])


def checked_truth(ty: Ty, fn: Fn, where: str) -> Fn:
    """Return ``fn``, checked when it runs to give true, false or null, unless ``ty`` proves it.

    Why only then: a value of a declared bool field is true or false already, so the
    conditions the compiler could check pay nothing; a value of unknown type (a dict's
    value, an undeclared context, a function's result) is checked as it is read, so a
    string or a number is never taken as true by Python's truthiness. Null counts as false.
    """
    if not ty.is_any and ty.known() <= {"bool"}:
        return fn

    def truth(env: Env) -> Any:
        value = fn(env)
        if value is True or value is False or value is None:
            return value
        raise EvaluationProblem(f"{where} needs true/false, got {value!r}")

    return truth


def _bool_op(tree: BoolOp, scope: Scope) -> Fn:
    fns = [_truth(t, scope, f"'{tree.op}'") for t in tree.operands]
    if tree.op == "and":
        if len(fns) == 2:  # the common case, without the loop
            a, b = fns
            return lambda env: bool(a(env) and b(env))
        return lambda env: all(f(env) for f in fns)
    if len(fns) == 2:
        a, b = fns
        return lambda env: bool(a(env) or b(env))
    return lambda env: any(f(env) for f in fns)


def _name(tree: Name, scope: Scope) -> tuple[Ty, Fn]:
    parts = tree.parts
    root, rest = _root(tree, scope)
    if root == "function":
        fn = scope.functions[tree.dotted]
        return _returns(fn), lambda env: fn(env.state)
    ty = {"state": scope.state, "context": scope.context, "output": scope.state}[root]
    walked = parts[: len(parts) - len(rest)]
    for part in rest:
        nxt = member(ty, part)
        if nxt is None:
            raise Problem(_no_field(".".join(walked), ty, part, scope), tree.pos)
        ty = nxt
        walked = (*walked, part)
    if root == "output" and rest:
        ty = ty | NULL  # a field the node did not write reads as null
    if root == "state" and _all_models(scope.state, rest):
        # Every step is a declared field of a model that cannot be null, so the values are
        # those models' instances: one C-level attribute walk reads it.
        return ty, operator.attrgetter(".".join(("state", *rest)))
    model = scope.context.model
    if root == "context" and model is not None:
        attributes = _all_models(scope.context, rest)
        return ty, _context_reader(model, rest, tree.dotted, ty, attributes=attributes)
    return ty, _reader(root, rest, tree.dotted)


def _context_reader(
    model: type[BaseModel], path: tuple[str, ...], dotted: str, ty: Ty, *, attributes: bool
) -> Fn:
    """Read a declared context: an attribute walk when the context is of the declared model
    (the common case; ``attributes``: every step is a model that cannot be null), the
    generic walk for anything else (a dict, say).

    Why the value read from anything else is checked against ``ty``: the conditions trust
    the declared type (a bool field is used as true/false as it is, ``==`` on it is
    Python's), which pydantic guarantees for the model only; a dict holding ``'no'`` for
    a bool would otherwise be taken as true, where an undeclared context is refused.
    """
    getter = operator.attrgetter(".".join(path)) if attributes else None

    def read(env: Env) -> Any:
        context = env.context
        if type(context) is model:
            return getter(context) if getter is not None else _walk(context, path)
        value = _walk(read_context(env, dotted), path)
        if fits(value, ty):
            return value
        name = model.__name__
        raise EvaluationProblem(
            f"'{dotted}' is declared {ty.describe(items=True)} by the context type {name}, "
            f"but the context (a {type(context).__name__}) holds {value!r}",
            fix=f"Pass the context as a {name} object (pydantic then checks it), or a dict "
            f"whose values fit the declared types.",
        )

    return read


def _all_models(ty: Ty, path: tuple[str, ...]) -> bool:
    for part in path[:-1]:
        nxt = member(ty, part)
        if nxt is None or nxt.kinds != frozenset({"model"}):
            return False
        ty = nxt
    return True


def _root(tree: Name, scope: Scope) -> tuple[str, tuple[str, ...]]:
    """Return where a name is read (state, context, output or function) and its path."""
    first, parts = tree.parts[0], tree.parts
    state_fields = fields_of(scope.state)
    if first in ("state", "context", "output") and first not in state_fields and len(parts) > 1:
        return first, parts[1:]
    if tree.dotted in scope.functions:
        # A registered function wins: its name was given on purpose, while a state field
        # or an open dict context (any key) may hold the same name by chance.
        return "function", ()
    if first in state_fields:
        return "state", parts
    if scope.context_declared and member(scope.context, first) is not None:
        return "context", parts
    shown = ", ".join(state_fields) or "none"
    context = " or of the context type" if scope.context_declared else ""
    raise Problem(
        f"unknown name '{tree.dotted}': it is no field of the state{context} and no "
        f"registered function (state fields: {shown}); fix the name, read the run's context "
        f"as context.{tree.dotted}, or register a function under that name",
        tree.pos,
    )


def _no_field(parent: str, ty: Ty, part: str, scope: Scope) -> str:
    known = fields_of(ty)
    if known:
        return f"'{parent}' has no field '{part}' (its fields: {', '.join(known)}); fix the name"
    return f"'{parent}' is {ty.describe()}, which has no fields; '{parent}.{part}' cannot be read"


def _reader(root: str, path: tuple[str, ...], dotted: str) -> Fn:
    if root == "state" and len(path) == 1:
        key = path[0]
        # A declared field of the state model: a plain attribute read.
        return lambda env: getattr(env.state, key)
    if root == "state":
        return lambda env: _walk(env.state, path)
    if root == "output":
        return lambda env: _walk(env.output, path) if env.output is not None else None
    return lambda env: _walk(read_context(env, dotted), path)


def _walk(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        value = read_field(value, part)
    return value


def _returns(fn: Callable[..., Any]) -> Ty:
    try:
        hint = typing.get_type_hints(fn).get("return", Any)
    except Exception:
        # An annotation that cannot be resolved says nothing; the value is checked when read.
        return ANY
    return ANY if hint is Any else of_annotation(hint)


def _call(tree: Call, scope: Scope) -> tuple[Ty, Fn]:
    if tree.builtin:
        return builtins.compile_builtin(tree, lambda t: compile_tree(t, scope))
    fn = scope.functions.get(tree.name)
    if fn is None:
        known = ", ".join(sorted(scope.functions)) or "none"
        raise Problem(
            f"'{tree.name}' is not a registered function (registered: {known}); register "
            f"it, e.g. functions={{'{tree.name}': my_function}}",
            tree.pos,
        )
    args = tree.args or ()
    _check_arity(fn, tree.name, len(args), tree.pos)
    fns = [compile_tree(a, scope)[1] for a in args]
    return _returns(fn), lambda env: fn(*[f(env) for f in fns])


def _check_arity(fn: Callable[..., Any], name: str, count: int, pos: int) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: checked when called
    try:
        signature.bind(*range(count))
    except TypeError:
        raise Problem(
            f"'{name}' cannot take {count} argument(s): its signature is {name}{signature}",
            pos,
        ) from None


_ORDERING = frozenset({"<", "<=", ">", ">="})


def _compare(tree: Compare, scope: Scope) -> Fn:
    lt, left = compile_tree(tree.left, scope)
    rt, right = compile_tree(tree.right, scope)
    op = tree.op
    if op in ("==", "!="):
        _check_equality(lt, rt, tree)
        return _equality(tree, lt, rt, left, right)
    if op in _ORDERING:
        _check_ordering(lt, rt, tree)
        compare = _ORDER_OPS[op]
        return lambda env: _ordered(compare, left(env), right(env), op)
    if not rt.is_any and not rt.known() & {"list", "str", "dict"}:
        raise Problem(
            f"'{op}' needs a list, string or dict on its right, but it is {rt.describe()}",
            tree.right.pos,
        )
    _check_membership(lt, rt, tree)
    found = _membership(lt, rt, left, right, op)
    if op == "in":
        return found
    return lambda env: not found(env)


def _equality(tree: Compare, lt: Ty, rt: Ty, left: Fn, right: Fn) -> Fn:
    """Compile ``==`` or ``!=``: Python's when the static types prove it is the language's."""
    op = tree.op
    if not _proven_equality(lt, rt):
        if op == "==":
            return lambda env: equal(left(env), right(env), op)
        return lambda env: not equal(left(env), right(env), op)
    if "list" in lt.kinds or "list" in rt.kinds:
        # Lists of one kind of scalar: Python's == is the language's, but for a tuple
        # and a list (both lists here), which Python never finds equal.
        def same(env: Env) -> bool:
            a, b = left(env), right(env)
            return bool(a == b) or (type(a) is not type(b) and equal(a, b, op))

        return same if op == "==" else lambda env: not same(env)
    if isinstance(tree.right, Literal):  # the common case: one call fewer
        value = tree.right.value
        if op == "==":
            return lambda env: left(env) == value
        return lambda env: left(env) != value
    if op == "==":
        return lambda env: left(env) == right(env)
    return lambda env: left(env) != right(env)


def _membership(lt: Ty, rt: Ty, left: Fn, right: Fn, op: str) -> Fn:
    """Compile ``in``: Python's when the static types prove it is the language's."""
    if not _proven_membership(lt, rt):
        return lambda env: contains(right(env), left(env), op)

    def found(env: Env) -> bool:
        container, item = right(env), left(env)
        if container is None:
            return False
        try:
            return item in container
        except TypeError:  # a list looked up in a set or a dict's keys: walk them
            return contains(container, item, op)

    return found


def _proven_membership(lt: Ty, rt: Ty) -> bool:
    """Tell whether ``x in y`` looks for a scalar among items of its one kind (or null)."""
    if lt.is_any or rt.is_any:
        return False
    kinds = rt.known()
    if kinds == {"str"}:
        return lt.kinds == {"str"}
    items = rt.items
    if len(kinds) != 1 or kinds == {"model"} or items is None:
        return False
    return _proven_equality(lt, items) and not items.kinds & _NESTED


_NESTED = frozenset({"list", "dict", "model"})


def _check_equality(lt: Ty, rt: Ty, tree: Compare) -> None:
    if not _never_equal(lt, rt):
        return
    inside = bool(lt.kinds & rt.kinds)
    raise Problem(
        f"'{tree.op}' compares {lt.describe(items=inside)} with {rt.describe(items=inside)}, "
        f"which are never equal; {_same_type(inside)}",
        tree.pos,
    )


def _never_equal(lt: Ty, rt: Ty) -> bool:
    """Tell whether the static types prove a value of ``lt`` never equals one of ``rt``:
    no kind in common, or lists whose items have none (equal only when both are empty)."""
    if lt.is_any or rt.is_any or "null" in lt.kinds or "null" in rt.kinds:
        return False
    common = lt.kinds & rt.kinds
    if not common:
        return True
    if common - {"list", "dict"} or lt.items is None or rt.items is None:
        return False
    return _never_equal(lt.items, rt.items)


def _same_type(inside: bool) -> str:
    if inside:
        return "compare with a list of the same item type"
    return "compare with a value of the same type"


def _check_membership(lt: Ty, rt: Ty, tree: Compare) -> None:
    """Refuse ``x in y`` when no item of ``y`` can be of ``x``'s type: it never holds."""
    if lt.is_any or rt.is_any or "null" in lt.kinds:
        return
    found: Ty | None = None
    for kind in rt.known():
        items = STR if kind == "str" else rt.items
        if items is None or items.is_any or "null" in items.kinds:
            return  # an item of unknown type, or null, may be found
        found = items if found is None else found | items
    if found is None or not _never_equal(lt, found):
        return
    never = "never holds" if tree.op == "in" else "always holds"
    if rt.known() == {"str"}:
        raise Problem(
            f"'{tree.op}' on a string looks for a string, but this is {lt.describe()}, so "
            f"it {never}; compare values of the same type",
            tree.pos,
        )
    inside = bool(lt.kinds & found.kinds)
    fix = _same_type(inside) if inside else "compare values of the same type"
    raise Problem(
        f"'{tree.op}' looks for {lt.describe(items=inside)} where every item is "
        f"{found.describe(items=inside)}, so it {never}; {fix}",
        tree.pos,
    )


def _proven_equality(lt: Ty, rt: Ty) -> bool:
    """Tell whether the static types prove that ``==`` compares values of one kind (or null),
    so Python's ``==`` is the language's: scalars of one kind, or lists whose items are.

    A dict is never proven: its values have no static type, and ``{'k': True}`` equals
    ``{'k': 1}`` in Python.
    """
    if lt.is_any or rt.is_any:
        return False
    a, b = lt.known(), rt.known()
    if not a or not b:
        return True
    if len(a) != 1 or a != b or a == {"dict"}:
        return False
    if a != {"list"}:
        return True
    items, other = lt.items, rt.items
    if items is None or other is None or (items.kinds | other.kinds) & _NESTED:
        return False
    return _proven_equality(items, other)


def _check_ordering(lt: Ty, rt: Ty, tree: Compare) -> None:
    kinds = {k for t in (lt, rt) if not t.is_any for k in t.known()}
    if kinds - {"number", "str"} or len(kinds) > 1:
        raise Problem(
            f"'{tree.op}' orders two numbers or two strings, but got {lt.describe()} and "
            f"{rt.describe()}",
            tree.pos,
        )


_ORDER_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}


def _ordered(compare: Callable[[Any, Any], bool], a: Any, b: Any, op: str) -> bool:
    """Order two values; an ordering with null is false (a missing count is not < 3)."""
    if a is None or b is None:
        return False
    mixed = isinstance(a, bool) or isinstance(b, bool) or type(a) is not type(b)
    if mixed and not (_is_number(a) and _is_number(b)):
        raise EvaluationProblem(f"'{op}' cannot order {a!r} and {b!r}")
    try:
        return compare(a, b)
    except TypeError:
        raise EvaluationProblem(f"'{op}' cannot order {a!r} and {b!r}") from None


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)
