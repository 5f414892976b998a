"""What a run returns and what a stream yields."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from nodestep._display.text import fields_repr
from nodestep._engine.interrupts import Interrupt
from nodestep._engine.views import result_html
from nodestep._errors import GraphConfigError, ResumeError

__all__ = [
    "FinalEventData",
    "GraphResult",
    "InterruptEventData",
    "StreamEvent",
    "result_of",
    "single_interrupt",
    "stream_modes",
]

S = TypeVar("S")

STREAM_MODES: tuple[str, ...] = ("updates", "values", "custom", "debug", "messages", "task_updates")


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a stream.

    Attributes:
        mode: ``"updates"``, ``"values"``, ``"custom"``, ``"debug"``, ``"messages"``,
            ``"task_updates"``, or a terminal mode: ``"final"`` or ``"interrupt"``.
        data: What the event carries; see the streaming docs for each mode.
        node: The node of the task the event belongs to, or ``None``.
        step: The superstep, counted from 0.
        task_id: The task the event belongs to, or ``None``.
        run_id: The id of the run.
        checkpoint_id: The history event to load the event's state at, or ``None``
            without a state store.
        path: For an event of a subgraph run (``stream(..., subgraphs=True)``), the
            parent task ids down to it, e.g. ``"review/legal"``; ``None`` for the graph's own.
    """

    mode: str
    data: Any
    node: str | None = None
    step: int = 0
    task_id: str | None = None
    run_id: str = ""
    checkpoint_id: str | None = None
    path: str | None = None

    def __repr__(self) -> str:
        names = ["mode", "node", "step", "data"] + (["path"] if self.path else [])
        return fields_repr(self, names, width=100)

    if not TYPE_CHECKING:  # for type checkers, an event is not subscriptable

        def __getitem__(self, key: Any) -> Any:
            # Unpacking (``for mode, data in graph.stream(...)``) asks for item 0 here.
            raise TypeError(
                "'StreamEvent' object is not subscriptable and cannot be unpacked: a stream "
                "yields one StreamEvent per event, not LangGraph's (mode, data) tuples or "
                "{node: update} dicts; read event.mode, event.node, event.data and, with "
                "subgraphs=True, event.path"
            )


@dataclass(frozen=True, slots=True)
class FinalEventData(Generic[S]):
    """The data of a ``"final"`` event: the completed state and the thread."""

    state: S
    thread_id: str

    def __repr__(self) -> str:
        return fields_repr(self, ("state", "thread_id"), width=100)


@dataclass(frozen=True, slots=True)
class InterruptEventData(Generic[S]):
    """The data of an ``"interrupt"`` event: the state before the paused superstep."""

    state: S
    thread_id: str
    interrupts: dict[str, Interrupt] = field(default_factory=dict)

    def __repr__(self) -> str:
        return fields_repr(self, ("state", "thread_id", "interrupts"), width=100)

    @property
    def interrupt(self) -> Interrupt:
        """The only pending ``Interrupt``, without spelling its key.

        Raises:
            ResumeError: no interrupt is pending (a breakpoint stopped the run), or several
                are; read ``interrupts`` by key then.
        """
        return single_interrupt(self.interrupts)


@dataclass(frozen=True, slots=True)
class GraphResult(Generic[S]):
    """What ``invoke``/``ainvoke`` return.

    Attributes:
        status: ``"completed"``, or ``"interrupted"`` when the run paused.
        state: The state as the declared type (before the paused superstep, if paused).
        step: The superstep the run finished or paused in, counted from 0.
        thread_id: The thread the run used (generated when none was given).
        branch_id: The history branch.
        run_id: The id of this run.
        checkpoint_id: The id of the run's last history event, or ``None`` without a store.
        interrupts: The pending interrupts, by key ``"<task_id>:<id>"``.
    """

    status: Literal["completed", "interrupted"]
    state: S
    step: int
    thread_id: str
    branch_id: str
    run_id: str
    checkpoint_id: str | None
    interrupts: dict[str, Interrupt] = field(default_factory=dict)

    def __repr__(self) -> str:
        names = ["status", "state", "step", "thread_id", "branch_id"]
        return fields_repr(self, names + (["interrupts"] if self.interrupts else []), width=100)

    def _repr_html_(self) -> str:
        return result_html(self)

    @property
    def interrupt(self) -> Interrupt:
        """The only pending ``Interrupt``, without spelling its key.

        Answer it with ``resume=Resume(value)``.

        Raises:
            ResumeError: no interrupt is pending (the run completed, or a breakpoint
                stopped it), or several are; read ``interrupts`` by key then.
        """
        return single_interrupt(self.interrupts)

    @property
    def data(self) -> dict[str, Any]:
        """The state as a dict of field values."""
        state: Any = self.state
        return {name: getattr(state, name) for name in type(state).model_fields}


def stream_modes(stream_mode: object) -> frozenset[str]:
    """Return the requested stream modes.

    Raises:
        GraphConfigError: a mode that does not exist, or a ``stream_mode`` that is neither
            a mode name nor a list of them (``None`` included: it has no default).
    """
    known = ", ".join(repr(m) for m in STREAM_MODES)
    if isinstance(stream_mode, str):
        modes = [stream_mode]
    elif isinstance(stream_mode, list | tuple | set | frozenset):
        modes = list(stream_mode)
    else:
        raise GraphConfigError(
            f"stream_mode is required and takes a mode name or a list of them, got "
            f"{stream_mode!r}; pass one of {known}, a list of them, or [] for only the "
            f"terminal event."
        )
    unknown = [m for m in modes if m not in STREAM_MODES]
    if unknown:
        raise GraphConfigError(
            f"Unknown stream_mode {', '.join(repr(m) for m in unknown)}; use "
            f"{known} or a list of them.{_langgraph_mode_hint(unknown)}"
        )
    return frozenset(modes)


# LangGraph's stream modes nodestep has under another name, or not at all.
_LANGGRAPH_MODES = {
    "tasks": "'task_updates' sends each task's update as it finishes; 'debug' shows what each "
    "task read and wrote",
    "checkpoints": "stream 'values' for the state after each superstep; with a state store "
    "each event names its checkpoint in event.checkpoint_id",
}


def _langgraph_mode_hint(unknown: Sequence[object]) -> str:
    """Return what to use instead of the LangGraph modes among ``unknown``, or ``""``."""
    hints = [
        f" LangGraph's {m!r} mode: {_LANGGRAPH_MODES[m]}."
        for m in unknown
        if isinstance(m, str) and m in _LANGGRAPH_MODES
    ]
    return "".join(hints)


def single_interrupt(interrupts: dict[str, Interrupt]) -> Interrupt:
    """Return the only interrupt of ``interrupts``; see ``GraphResult.interrupt``."""
    if len(interrupts) == 1:
        return next(iter(interrupts.values()))
    if not interrupts:
        raise ResumeError(
            "No interrupt is pending: the run completed, or a breakpoint stopped it without "
            "an interrupt. Check result.status == 'interrupted' and result.interrupts first."
        )
    keys = ", ".join(repr(k) for k in interrupts)
    raise ResumeError(
        f"{len(interrupts)} interrupts are pending ({keys}), so there is no single one; "
        f"read them by key from .interrupts and answer with Resume(answers={{key: value}}).",
        pending=list(interrupts),
    )


def result_of(event: StreamEvent, branch_id: str) -> GraphResult[Any]:
    """Return the ``GraphResult`` a run's terminal event stands for."""
    data = event.data
    completed = event.mode == "final"
    return GraphResult(
        "completed" if completed else "interrupted",
        data.state,
        event.step,
        data.thread_id,
        branch_id,
        event.run_id,
        event.checkpoint_id,
        {} if completed else dict(data.interrupts),
    )
