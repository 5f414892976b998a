"""Interrupts: a node pauses the run for an answer, and a later call resumes it."""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from nodestep._display.text import fields_repr, short_repr
from nodestep._engine.views import interrupt_html
from nodestep._errors import GraphExecutionError
from nodestep._state.json import to_json_value

__all__ = ["GraphInterrupt", "Interrupt", "Resume", "TaskScope", "current_task", "interrupt"]

_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True, slots=True)
class Interrupt:
    """A pending interrupt: a node waits for an answer.

    Attributes:
        key: ``"<task_id>:<id>"``, the key to answer it by.
        id: The id the node gave ``interrupt()``.
        node: The node that paused.
        task_id: The task that paused.
        payload: What the node asked, as JSON data.
    """

    key: str
    id: str
    node: str
    task_id: str
    payload: Any

    def __repr__(self) -> str:
        return fields_repr(self, ("node", "id", "payload", "key"), width=100)

    def _repr_html_(self) -> str:
        return interrupt_html(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "id": self.id,
            "node": self.node,
            "task": self.task_id,
            "payload": self.payload,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interrupt:
        return cls(data["key"], data["id"], data["node"], data["task"], data["payload"])


_NO_VALUE: Any = object()


class Resume:
    """The answer(s) to a paused thread's interrupts: pass it as ``resume=``.

    ``Resume(value)`` answers the only pending interrupt; ``Resume(answers={key: value})``
    answers several by key and must answer all of them. Answers are stored as JSON values.
    """

    __slots__ = ("answers", "value")

    def __init__(self, value: Any = _NO_VALUE, *, answers: dict[str, Any] | None = None):
        if value is not _NO_VALUE and answers is not None:
            raise TypeError("Resume takes one value or answers={key: value}, not both.")
        if value is _NO_VALUE and answers is None:
            raise TypeError(
                "Resume needs an answer: Resume(value) or Resume(answers={key: value})."
            )
        if answers is not None and not isinstance(answers, dict):
            raise TypeError(f"Resume(answers=...) takes a dict of key -> answer, got {answers!r}.")
        if answers == {}:
            raise TypeError(
                "Resume(answers={}) answers nothing. answers= maps the key of every pending "
                "interrupt ('<task_id>:<id>', as in result.interrupts) to its answer, e.g. "
                "Resume(answers={'legal:sign_off': 'yes'}); for the only pending interrupt, "
                "Resume(value) is enough."
            )
        self.value = value
        self.answers = answers

    @property
    def single(self) -> bool:
        return self.answers is None

    def __repr__(self) -> str:
        if self.single:
            return f"Resume({short_repr(self.value)})"
        return f"Resume(answers={short_repr(self.answers)})"


class GraphInterrupt(BaseException):
    """Raised by ``interrupt()`` to pause the run.

    It derives from ``BaseException`` so that ``except Exception`` in node code does not
    swallow the pause.
    """

    def __init__(self, pending: Interrupt, *more: Interrupt) -> None:
        super().__init__(pending.key)
        self.pending = pending
        # A subgraph task pauses with every pending interrupt of its child run.
        self.more = more


class TaskScope:
    """What ``interrupt()`` needs to know about the task that calls it."""

    __slots__ = ("agents", "answers", "can_pause", "node", "runtime", "seen", "task_id")

    def __init__(
        self, node: str, task_id: str, answers: dict[str, Any], can_pause: bool, runtime: Any
    ):
        self.node = node
        self.task_id = task_id
        self.answers = answers
        self.can_pause = can_pause
        # The task's ``_engine.runtime.Runtime`` (``Any``: that module imports this one,
        # through ``_engine.request``): a subgraph task runs its child run on it
        # (``_engine.subgraph``).
        self.runtime = runtime
        self.seen: set[str] = set()
        # The sub-agents the task spawned (``_engine.subagents.TaskAgents``), made by its
        # first ``ctx.spawn``: the task's end cancels those still running.
        self.agents: Any = None

    def part(self, name: str) -> TaskScope:
        """Return the scope of a part of the task that pauses on its own: ``name``.

        The tool node runs each call of a reply with several in a part named by the call's
        id, so that two calls asking with one ``id`` get two keys,
        ``"<task_id>/<name>:<id>"``, and each call counts its own sub-agents. The part
        sees every answer, as the task does; its ``agents`` are the caller's to finish.
        """
        return TaskScope(
            self.node, f"{self.task_id}/{name}", self.answers, self.can_pause, self.runtime
        )


current_task: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar(
    "nodestep_task", default=None
)


P = ParamSpec("P")
R = TypeVar("R")


def _explain_missing_id(fn: Callable[P, R]) -> Callable[P, R]:
    """Keep ``id`` required in the signature type checkers read, and explain it when missing.

    Python's own "missing keyword-only argument" would not say why the id is needed; a
    default in the signature would say it, but then type checkers would not catch the
    missing ``id=`` before the run does.
    """

    @functools.wraps(fn)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if "id" not in kwargs:
            raise TypeError(
                "interrupt() needs id=: the id names the question, so that the answer given "
                "on resume reaches it when the node runs again from the top (its key is "
                "'<task_id>:<id>'). Call it as interrupt(payload, id='approve'), with an id "
                "unique within one run of the node."
            )
        return fn(*args, **kwargs)

    return checked


@_explain_missing_id
def interrupt(payload: Any, *, id: str) -> Any:
    """Pause the run until a person answers; return the answer once the run is resumed.

    The node runs again from the top when the run resumes, and this call then returns the
    answer. Keep work done before the call in ``ctx.cache`` to do it once.

    Args:
        payload: What to show the person; stored as JSON.
        id: Names the question: letters, digits, ``_``, ``.`` and ``-``, unique within one
            run of the node. The interrupt's key is ``"<task_id>:<id>"``.

    Returns:
        The answer given with ``resume=Resume(...)``, as JSON data.

    Raises:
        GraphInterrupt: to pause (a ``BaseException``; do not catch it).
        TypeError: called without ``id=``.
        GraphExecutionError: called outside a node, with a bad or repeated id, or in a run
            without a state store and thread.
    """
    scope = current_task.get()
    if scope is None:
        raise GraphExecutionError("interrupt() can only be called inside a running node.")
    if not isinstance(id, str) or not _ID_PATTERN.match(id):
        raise GraphExecutionError(
            f"Node '{scope.node}' called interrupt() with id={id!r}; an id is made of letters, "
            f"digits, '_', '.' and '-', e.g. id='approve'."
        )
    if id in scope.seen:
        raise GraphExecutionError(
            f"Node '{scope.node}' called interrupt() twice with id '{id}'; each interrupt of one "
            f"run of a node needs its own id."
        )
    scope.seen.add(id)
    key = f"{scope.task_id}:{id}"
    if key in scope.answers:
        return scope.answers[key]
    if not scope.can_pause:
        raise GraphExecutionError(
            f"Node '{scope.node}' called interrupt(id='{id}'), but the run has no state store "
            f"to keep the paused thread. Pass state_store=InMemoryStateStore() (or a "
            f"FilesystemStateStore) and a thread_id."
        )
    data = to_json_value(payload, what=f"The payload of interrupt '{key}'")
    raise GraphInterrupt(Interrupt(key, id, scope.node, scope.task_id, data))
