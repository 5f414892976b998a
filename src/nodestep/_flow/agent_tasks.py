"""Sub-agents as a node sees them: the task it spawns, the handle it gets, the result.

A node spawns sub-agents with ``ctx.spawn`` and waits for them with ``ctx.gather``. This
module holds only the data and the ``AgentSpawner`` interface; the engine installs the
spawner that runs them (``_engine.subagents``), so the flow layer never imports the
engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from nodestep._conditions.env import NO_CONTEXT as _NO_CONTEXT
from nodestep._display.text import fields_repr

__all__ = ["AgentHandle", "AgentResult", "AgentSpawner", "AgentStatus", "AgentTask"]

AgentStatus = Literal["completed", "failed", "interrupted"]
"""How a sub-agent's run ended: it completed, it raised, or it waits for answers."""

NO_CONTEXT: Any = _NO_CONTEXT


@dataclass(frozen=True, slots=True)
class AgentTask:
    """One sub-agent to spawn: which agent, with what input, under which name.

    Args:
        agent: The agent: a ``Graph`` with its flow declared, an object with such a graph
            as its ``graph`` attribute, or the name of one of
            the parent graph's ``Graph(..., agents=[...])``.
        input: The input of the sub-agent's run, a dict of its state's fields.
        name: The name its results and errors carry and its thread id holds; when not
            given, the name ``agent`` is, or its graph's name.
        context: The sub-agent's ``context=``; the parent run's when not given.
    """

    agent: Any
    input: Mapping[str, Any] | None = None
    name: str | None = None
    context: Any = NO_CONTEXT

    def __post_init__(self) -> None:
        if self.input is not None and not isinstance(self.input, Mapping):
            raise TypeError(
                f"AgentTask(input=...) takes a dict of the agent's state fields, got "
                f"{type(self.input).__name__}: e.g. AgentTask(agent, input={{'topic': 'solar'}})."
            )
        if self.name is not None and (not isinstance(self.name, str) or not self.name.strip()):
            raise TypeError(
                f"AgentTask(name=...) takes a non-blank string, got {self.name!r}; leave it "
                f"out to use the graph's name."
            )

    def __repr__(self) -> str:
        shown = self.agent if isinstance(self.agent, str) else getattr(self.agent, "name", "?")
        return f"AgentTask({shown!r}, name={self.name!r})"


@dataclass(frozen=True, slots=True)
class AgentResult:
    """How one sub-agent's run ended.

    Attributes:
        name: The sub-agent's name.
        index: Its place among the sub-agents of its name its task spawned, from 0.
        thread_id: The thread it ran on, in the parent's store.
        status: ``"completed"``, ``"failed"`` or ``"interrupted"``.
        state: Its state: the final one when completed, else the last one stored (or
            ``None`` when it never stored one).
        error: What it raised, when failed.
        interrupts: Its pending interrupts when interrupted, keyed as the parent's resume
            answers them: ``"<task_id>/<name>#<index>/<key>"``.
    """

    name: str
    index: int
    thread_id: str
    status: AgentStatus
    state: BaseModel | None = None
    error: BaseException | None = None
    interrupts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the sub-agent completed."""
        return self.status == "completed"

    def __repr__(self) -> str:
        return fields_repr(self, ("name", "index", "status", "thread_id", "error"), width=100)


class AgentHandle:
    """A spawned sub-agent that may still run; ``ctx.gather`` waits for it.

    Attributes:
        name: The sub-agent's name.
        index: Its place among the sub-agents of its name its task spawned, from 0.
        thread_id: The thread it runs on, in the parent's store.
        job: The engine's running job of it (``_engine.subagents``).
        gathered: Whether ``ctx.gather`` took it.
    """

    __slots__ = ("gathered", "index", "job", "name", "thread_id")

    def __init__(self, name: str, index: int, thread_id: str, job: Any) -> None:
        self.name = name
        self.index = index
        self.thread_id = thread_id
        self.job = job
        self.gathered = False

    @property
    def key(self) -> str:
        """``"<name>#<index>"``: the sub-agent's place in interrupt keys."""
        return f"{self.name}#{self.index}"

    def __repr__(self) -> str:
        return f"<AgentHandle {self.key} thread={self.thread_id!r}>"


class AgentSpawner(Protocol):
    """What runs a node's sub-agents; the engine installs one in every ``NodeContext``.

    It finds the running task itself (the engine's task scope), so one spawner serves
    every task of a run.
    """

    async def spawn(self, tasks: Sequence[AgentTask]) -> list[AgentHandle]:
        """Start ``tasks`` for the running node; return a handle each, in order."""
        ...

    async def gather(
        self, handles: Sequence[AgentHandle], return_exceptions: bool
    ) -> list[AgentResult]:
        """Wait for ``handles``; return their results in order (see ``NodeContext.gather``)."""
        ...
