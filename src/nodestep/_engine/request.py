"""``RunRequest``: the checked options of one call, as the engine receives them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodestep._engine.interrupts import Resume
from nodestep._flow.credentials import CredentialsProvider
from nodestep._memory.contract import MemoryStore
from nodestep.store import StateStore

__all__ = ["RunRequest"]


@dataclass(frozen=True, slots=True)
class RunRequest:
    """The options of one call of ``invoke``, ``ainvoke``, ``stream`` or ``astream``.

    The public API checks them and resolves the graph's defaults (store, breakpoints)
    before the engine sees them.

    Attributes:
        input: A dict patch, a state instance, or ``None`` to continue or resume.
        thread_id: The thread, or ``None`` to generate one (only without a store).
        branch_id: The history branch.
        resume: The answers to a paused thread, or ``None``.
        context: Call-time data for nodes, never stored (a sentinel when not given).
        store: The store of this call, or ``None``.
        modes: The stream modes asked for; empty for ``invoke``.
        interrupt_before: Nodes to pause before.
        interrupt_after: Nodes to pause after.
        request_key: The caller's key of this call's input, or ``None``: a call with a key
            the branch already has returns that run's result, or continues it.
        wait_for_thread: Seconds to wait for a branch another writer holds, or ``None``.
        credentials: Resolves the roles of nodes to credentials; never stored.
        memory: The long-term memory store nodes reach as ``ctx.memory``; never stored.
        subgraphs: Whether the stream includes the events of subgraph runs.
        max_steps: The superstep limit of this call, or ``None`` for the graph's.
        ends_turn: A continuation that may find the thread idle: a keyed retry of a turn
            whose supersteps all ran but whose end was not stored (a crash, a lost
            connection); the run then stores the end and runs nothing.
    """

    input: Any
    thread_id: str | None
    branch_id: str
    resume: Resume | None
    context: Any
    store: StateStore | None
    modes: frozenset[str]
    interrupt_before: frozenset[str]
    interrupt_after: frozenset[str]
    request_key: str | None = None
    wait_for_thread: float | None = None
    credentials: CredentialsProvider | None = None
    memory: MemoryStore | None = None
    subgraphs: bool = False
    max_steps: int | None = None
    ends_turn: bool = False
