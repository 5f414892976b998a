"""``Condition``: a ``when`` expression, parsed once, checked and compiled per graph."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.compiler import Fn, Scope, checked_truth, compile_tree
from nodestep._conditions.env import Env, EvaluationProblem
from nodestep._conditions.syntax import BoolOp, Call, Compare, Expr, ListExpr, Not, Problem, parse
from nodestep._conditions.types import ANY, of_annotation
from nodestep._errors import ConditionError, GraphConfigError, GraphExecutionError

__all__ = ["CompiledCondition", "Condition", "Source", "failed"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a condition was written, so its errors point there.

    Attributes:
        file: The file, or ``None`` for a condition written in Python.
        line: The 1-based line where the condition's text starts.
        column: The 1-based column where the condition's text starts.
        positions: The line and column of each character of the text, when the text is
            not the source as written (a YAML scalar that is quoted with escapes, a block,
            folded lines); ``None``: the text runs on from ``line`` and ``column``.
        exact: Whether a place inside the text can be found; ``False`` (text whose
            characters could not be matched to the source) places every error at the
            start of the text and says so.
    """

    file: str | None = None
    line: int = 1
    column: int = 1
    positions: tuple[tuple[int, int], ...] | None = None
    exact: bool = True


class Condition:
    """A ``when`` condition: parsed now, checked against a state when its graph compiles.

    Args:
        text: The condition, e.g. ``"status == 'complete' and retry_count < 3"``.
        source: Where it was written (a manifest sets it); errors point there.

    Raises:
        ConditionError: the text does not parse; the error gives the line and column.
    """

    __slots__ = ("on_error", "reads_output", "source", "text", "tree")

    def __init__(self, text: str, source: Source | None = None) -> None:
        if not isinstance(text, str):
            raise TypeError(f"A condition is a string, got {type(text).__name__}.")
        self.text = text
        self.source = source or Source()
        try:
            self.tree: Expr = parse(text)
        except Problem as problem:
            raise self.error(problem) from None
        self.on_error = _mentions(self.tree, _is_error_call)
        """Whether the condition can take a node's failure (it uses ``$is_error``)."""
        self.reads_output = "output." in text
        """Whether the condition may read the node's update (a cheap over-estimate)."""

    def compile(
        self,
        state: type[BaseModel],
        *,
        context: Any = None,
        functions: Mapping[str, Callable[..., Any]] | None = None,
    ) -> CompiledCondition:
        """Check the condition against ``state`` (and ``context``) and compile it.

        Args:
            state: The state class.
            context: The type of the run's ``context=`` (a model class or a dict type),
                or ``None`` when it is not declared (``context.x`` is then checked at
                run time).
            functions: The functions the condition may call, by dotted name.

        Raises:
            ConditionError: an unknown name or function, or types that cannot be compared.
        """
        declared = context is not None
        scope = Scope(
            state=of_annotation(state),
            context=of_annotation(context) if declared else ANY,
            functions=dict(functions or {}),
            context_declared=declared,
        )
        try:
            ty, fn = compile_tree(self.tree, scope)
            if not ty.is_any and "bool" not in ty.kinds:
                raise Problem(
                    f"a condition must be true or false, but this is {ty.describe()}; compare "
                    f"it (x == ...) or test it with $exists(x)",
                    self.tree.pos,
                )
        except Problem as problem:
            raise self.error(problem) from None
        return CompiledCondition(self, checked_truth(ty, fn, "the condition"))

    def error(self, problem: Problem) -> ConditionError:
        """Return the ``ConditionError`` for ``problem``, placed in the source."""
        before = self.text[: problem.offset]
        line, column = self._place(problem.offset)
        where = f"{self.source.file}:{line}:{column}: " if self.source.file else ""
        at = "" if self.source.file else f" (column {column})"
        if not self.source.exact:
            at += " (where the text starts: the place inside it cannot be told)"
        first = self.text.split("\n")[before.count("\n")] if self.text else ""
        caret = " " * (len(before) - (before.rindex("\n") + 1 if "\n" in before else 0)) + "^"
        return ConditionError(
            f"{where}condition {self.text!r}{at}: {problem.message}.\n    {first}\n    {caret}",
            text=self.text,
            offset=problem.offset,
            file=self.source.file,
            line=line,
            column=column,
        )

    def _place(self, offset: int) -> tuple[int, int]:
        """Return the line and column in the source of the text's character at ``offset``."""
        source = self.source
        if not source.exact:
            return source.line, source.column
        positions = source.positions
        if positions:
            if offset < len(positions):
                return positions[offset]
            line, column = positions[-1]  # just past the end of the text
            return line, column + 1
        before = self.text[:offset]
        if "\n" in before:
            return source.line + before.count("\n"), len(before) - before.rindex("\n")
        return source.line, source.column + len(before)

    def __repr__(self) -> str:
        return f"Condition({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class CompiledCondition:
    """A condition checked against one graph's state, ready to evaluate.

    Attributes:
        condition: The condition.
        text: Its text.
        on_error: Whether it can take a node's failure.
        reads_output: Whether it may read the node's update.
    """

    __slots__ = ("condition", "fn", "on_error", "reads_output", "text")

    def __init__(self, condition: Condition, fn: Fn) -> None:
        self.condition = condition
        self.text = condition.text
        self.on_error = condition.on_error
        self.reads_output = condition.reads_output
        self.fn = fn

    def holds(self, env: Env) -> bool:
        """Evaluate the condition on ``env``.

        Raises:
            GraphExecutionError: a value does not fit an operation (through an untyped
                context, say); exceptions of registered functions propagate as they are.
        """
        try:
            return bool(self.fn(env))
        except EvaluationProblem as problem:
            fix = problem.fix or (
                "The value's type was not known when the flow compiled (a dict's value, a "
                "context whose type is not declared, a function without a return "
                "annotation): declare the type so the condition is checked then, or write a "
                "condition that fits the value."
            )
            raise GraphExecutionError(
                f"Condition {self.text!r} could not be evaluated: {problem}. {fix}"
            ) from None

    def __repr__(self) -> str:
        return f"CompiledCondition({self.text!r})"


def failed(*errors: type[BaseException]) -> Condition:
    """Return a condition that holds when the node failed with one of ``errors``.

    ``when(failed(TimeoutError), fallback, otherwise=next_node)`` routes a node's timeout
    to ``fallback`` instead of failing the run; ``failed()`` takes any failure. It is the
    condition ``$is_error('TimeoutError')``: classes match by name, subclasses included.

    Raises:
        GraphConfigError: an argument is not an exception class.
    """
    for error in errors:
        if not (isinstance(error, type) and issubclass(error, BaseException)):
            raise GraphConfigError(
                f"failed(...) takes exception classes, e.g. failed(TimeoutError), got {error!r}."
            )
    names = ", ".join(repr(e.__name__) for e in errors)
    return Condition(f"$is_error({names})")


def _mentions(tree: Expr, test: Callable[[Expr], bool]) -> bool:
    if test(tree):
        return True
    children: tuple[Expr, ...] = ()
    if isinstance(tree, BoolOp):
        children = tree.operands
    elif isinstance(tree, Not):
        children = (tree.operand,)
    elif isinstance(tree, Compare):
        children = (tree.left, tree.right)
    elif isinstance(tree, ListExpr | Call):
        children = tree.items if isinstance(tree, ListExpr) else (tree.args or ())
    return any(_mentions(c, test) for c in children)


def _is_error_call(tree: Expr) -> bool:
    return isinstance(tree, Call) and tree.builtin and tree.name == "is_error"
