"""Channels: one per state key, plus one trigger channel per node.

A compiled state schema holds one channel per field. A *last-value* channel keeps the last
write and takes one writer per superstep; a *reducer* channel folds every write into its
value with the field's reducer. Edges are data too: each node has a *trigger* channel, and
a task that routes to a node writes to that node's trigger. The planner runs the nodes whose
trigger channels were written in the last superstep; triggers are ephemeral, so each write
fires exactly once.

Channels hold no values themselves: values live in the state dict that the superstep
algebra passes around, so a snapshot is just a dict and copying it is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from nodestep._errors import InvalidUpdateError
from nodestep._state.reducers import replace

__all__ = [
    "Channel",
    "ChannelWrite",
    "FieldWrite",
    "LastValueChannel",
    "ReducerChannel",
    "TriggerChannel",
    "channel_for",
    "validation_summary",
]


FieldWrite = tuple[str, Any, bool]
"""One validated write, as a node's update holds it: field, value, and whether it bypasses
the field's reducer (``Replace``)."""


@dataclass(slots=True, frozen=True)
class ChannelWrite:
    """One write to a channel, as a superstep's merge sees it: who wrote, the value, and
    whether it bypasses the reducer."""

    writer: str
    value: Any
    replace: bool = False


def _conflict(
    key: str,
    writes: Sequence[ChannelWrite],
    step: int | None,
    why: str,
    who: str = "only one node write it per superstep",
    fix: str | None = None,
) -> InvalidUpdateError:
    """Return the error for conflicting writes; ``fix`` replaces the advice for a plain
    field (give it a merging reducer, or let ``who``) where the field has a reducer."""
    writers = sorted({w.writer for w in writes})
    where = f" in step {step}" if step is not None else ""
    names = ", ".join(f"'{w}'" for w in writers)
    if fix is None:
        fix = (
            f"Give the field a merging reducer (Annotated[T, reducer], e.g. add for lists or "
            f"operator.add for numbers), or let {who}."
        )
    return InvalidUpdateError(
        f"Field '{key}' got writes from {names}{where}; {why}. {fix}",
        field=key,
        writers=writers,
        step=step,
    )


def _same(a: Any, b: Any) -> bool:
    """Tell whether two written values are the same value (equal, and of one type)."""
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an __eq__ that raises: they are not known to be the same
        return False


def validation_summary(error: ValidationError, offset: int = 0) -> str:
    """Return the first problem of a pydantic ``ValidationError`` and where it is.

    ``offset`` is added to a first position that is a list index: the error is of the
    items appended to a list, which starts at that index.
    """
    detail = error.errors(include_url=False)[0]
    loc = list(detail.get("loc", ()))
    if offset and loc and type(loc[0]) is int:
        loc[0] += offset
    where = ".".join(str(p) for p in loc)
    message = str(detail.get("msg", "invalid value"))
    return f"{message} (at {where})" if where else message


def _names(writers: Sequence[str]) -> str:
    return ", ".join(f"'{w}'" for w in dict.fromkeys(writers)) or "the input or update_state"


class Channel:
    """A state key and the rule for merging writes into it."""

    __slots__ = ("key",)
    merging: bool = False

    def __init__(self, key: str) -> None:
        self.key = key

    def apply(
        self,
        current: Any,
        value: Any,
        replace: bool,
        writer: str | None = None,
        step: int | None = None,
    ) -> Any:
        """Return the new value after one write (``replace``: bypass the reducer).

        ``writer`` names who wrote and ``step`` the superstep, for messages; ``writer`` is
        ``None`` for the input and ``update_state``.
        """
        raise NotImplementedError

    def merge(self, current: Any, writes: Sequence[ChannelWrite], step: int | None = None) -> Any:
        """Return the new value after all writes of one superstep, in their fixed order."""
        raise NotImplementedError


class LastValueChannel(Channel):
    """A plain field: a write replaces the value; one value per superstep.

    Writes from two nodes in one superstep conflict. Several tasks of one node (an edge and
    ``Send`` tasks, or several ``Send`` tasks) may write it only when they write the same
    value: keeping the last of different values would silently drop the others.
    """

    __slots__ = ()

    def apply(
        self,
        current: Any,
        value: Any,
        replace: bool,
        writer: str | None = None,
        step: int | None = None,
    ) -> Any:
        return value

    def merge(self, current: Any, writes: Sequence[ChannelWrite], step: int | None = None) -> Any:
        first = writes[0].writer
        for w in writes:
            if w.writer != first:
                raise _conflict(self.key, writes, step, "a plain field takes one writer per step")
        last = writes[-1].value
        for w in writes:
            if not _same(w.value, last):
                raise _conflict(
                    self.key,
                    writes,
                    step,
                    f"{len(writes)} tasks of one node wrote different values to a plain field, "
                    f"which keeps one value per step, so all but one would be lost",
                    "only one of its tasks write it per superstep",
                )
        return last


class ReducerChannel(Channel):
    """A field with a reducer: every write is folded into the value.

    ``check``, when given, validates the folded value against the field's type and
    constraints, and returns it validated. Constraints (``Field(max_length=3)``, say) hold
    for the merged value, not only for each write; and a reducer's result is stored as the
    field's value, so one that may return another type (any reducer but those
    ``reducers.keeps_field_type`` trusts) has it checked as a plain write is, rather than
    stored and failing on a later load. The schema gives ``check`` only to such fields, so
    ``add`` and the other trusted reducers on fields without constraints pay nothing.
    ``expected`` is the field's type as messages show it, given with ``check`` for a
    reducer that is not trusted (``None``: the check is there for the constraints).
    """

    __slots__ = ("check", "expected", "reducer")
    merging = True

    def __init__(
        self,
        key: str,
        reducer: Callable[[Any, Any], Any],
        check: Callable[[Any], Any] | None = None,
        expected: str | None = None,
    ) -> None:
        super().__init__(key)
        self.reducer = reducer
        self.check = check
        self.expected = expected

    def apply(
        self,
        current: Any,
        value: Any,
        replace: bool,
        writer: str | None = None,
        step: int | None = None,
    ) -> Any:
        if replace:
            return value
        try:  # inline, not a helper call: this runs for every write of a reducer field
            value = self.reducer(current, value)
        except Exception as error:
            raise self._failed(error, writer, step) from error
        check = self.check
        return value if check is None else self._checked(check, value, [writer], step)

    def merge(self, current: Any, writes: Sequence[ChannelWrite], step: int | None = None) -> Any:
        if any(w.replace for w in writes):
            self._check_replaces(writes, step)
        reducer = self.reducer
        value = current
        for w in writes:
            if w.replace:
                value = w.value
                continue
            try:
                value = reducer(value, w.value)
            except Exception as error:
                raise self._failed(error, w.writer, step) from error
        check = self.check
        if check is None or all(w.replace for w in writes):
            return value
        return self._checked(check, value, [w.writer for w in writes], step)

    def _check_replaces(self, writes: Sequence[ChannelWrite], step: int | None) -> None:
        # The field has a reducer already: the fix is in who writes Replace(...), and when.
        first = writes[0].writer
        if any(w.writer != first for w in writes):
            replacers = _names(sorted({w.writer for w in writes if w.replace}))
            raise _conflict(
                self.key,
                writes,
                step,
                f"a Replace(...) write does not merge with others (Replace from {replacers})",
                fix=(
                    "Let a node that Replaces the field be its only writer in that superstep, "
                    "or Replace it in a later superstep (a node after the others), once the "
                    "field's reducer has merged their writes."
                ),
            )
        replaced = [w.value for w in writes if w.replace]
        if any(not _same(v, replaced[-1]) for v in replaced):
            raise _conflict(
                self.key,
                writes,
                step,
                f"{len(replaced)} tasks of one node wrote different Replace(...) values, and "
                f"only one can be kept",
                fix=(
                    "Let only one of its tasks Replace it per superstep; the others can write "
                    "values for the field's reducer to merge."
                ),
            )

    def _failed(self, error: Exception, writer: str | None, step: int | None) -> InvalidUpdateError:
        """The error for a reducer that raised ``error`` (the caller chains it as cause)."""
        name = getattr(self.reducer, "__name__", None) or repr(self.reducer)
        where = f" in step {step}" if step is not None else ""
        return InvalidUpdateError(
            f"The reducer {name} of field '{self.key}' failed on the write from "
            f"{_names([writer] if writer else [])}{where}: {type(error).__name__}: "
            f"{error}. Write a value the reducer takes (Replace(value) skips it), or fix "
            f"the reducer.",
            field=self.key,
            writers=[writer] if writer else [],
            step=step,
        )

    def _checked(
        self, check: Callable[[Any], Any], value: Any, writers: list[str | None], step: int | None
    ) -> Any:
        try:
            return check(value)
        except ValidationError as error:
            names = [w for w in writers if w]
            where = f" in step {step}" if step is not None else ""
            if self.expected is None:
                message = (
                    f"Field '{self.key}' breaks its constraints after merging the writes of "
                    f"{_names(names)}{where}: {validation_summary(error)}. The constraints "
                    f"hold for the merged value, not only for each write: write less, shorten "
                    f"the field with Replace(...), or loosen the constraint."
                )
            else:
                message = self._misfit(value, error, f"{_names(names)}{where}")
            raise InvalidUpdateError(
                message, field=self.key, writers=sorted(set(names)), step=step
            ) from error

    def _misfit(self, value: Any, error: ValidationError, writes: str) -> str:
        """The message for a reducer whose result its field refused with ``error``."""
        name = getattr(self.reducer, "__name__", None) or repr(self.reducer)
        kind = type(value).__name__
        shown = "None" if value is None else f"{'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}"
        return (
            f"The reducer {name} of field '{self.key}' returned {shown} after "
            f"merging the writes of {writes}, which the field refuses: "
            f"{validation_summary(error)}. A reducer's result is stored as the field's "
            f"value, so it must fit the field's type {self.expected} and its constraints: "
            f"make {name} return a {self.expected}."
        )


def channel_for(
    key: str,
    reducer: Callable[[Any, Any], Any] | None,
    check: Callable[[Any], Any] | None = None,
    expected: str | None = None,
) -> Channel:
    """Return the channel for a field with the given reducer (``None`` or ``replace``: plain).

    ``check`` validates a reducer field's merged value, and ``expected`` names the field's
    type for a reducer it is checked for (see ``ReducerChannel``).
    """
    if reducer is None or reducer is replace:
        return LastValueChannel(key)
    return ReducerChannel(key, reducer, check, expected)


@dataclass(slots=True)
class TriggerChannel:
    """The ephemeral channel that starts a node: written by routes, read once by the planner.

    ``edge`` is set when an edge, branch or ``Command(goto=...)`` named the node; ``sends``
    holds the payloads of ``Send`` tasks in the order they were routed.
    """

    node: str
    edge: bool = False
    sends: list[dict[str, Any]] = field(default_factory=list)
