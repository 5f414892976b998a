"""``NodeContext``: what a node knows about the run it is part of."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nodestep._conditions.env import NO_CONTEXT as _CONDITIONS_NO_CONTEXT
from nodestep._errors import ContextNotProvidedError, GraphExecutionError
from nodestep._flow.agent_tasks import AgentHandle, AgentResult, AgentSpawner, AgentTask
from nodestep._flow.credentials import Credentials, CredentialsProvider, role_lookup
from nodestep._memory.contract import MemoryStore

__all__ = ["NO_CONTEXT", "NodeContext"]

NO_CONTEXT: Any = _CONDITIONS_NO_CONTEXT
"""Stands for "no ``context=`` given" (``None`` is a context a caller may pass); the
conditions' own marker, so a condition can tell a run without context from one with None."""


class NodeContext:
    """What a node knows about the run it is part of.

    A node gets it by declaring a parameter annotated ``NodeContext``, under any name,
    positional (before or after the state) or keyword-only.

    Attributes:
        graph_name: The graph's name.
        node: The node's name.
        run_id: The id of this call of ``invoke``/``stream``.
        thread_id: The thread of the run.
        branch_id: The history branch of the run.
        step: The superstep, counted from 0.
        task_id: The task's id: the node name, then ``name[1]``, ``name[2]`` for further
            tasks of the node in the same superstep.
        cache: A dict that survives a pause of this task (see interrupts); empty otherwise.
        attempt: Which attempt of the task this is, from 1 (see ``RetryPolicy``).
    """

    __slots__ = (
        "_agents",
        "_context",
        "_credentials",
        "_emit",
        "_memory",
        "_streamed",
        "attempt",
        "branch_id",
        "cache",
        "graph_name",
        "node",
        "run_id",
        "step",
        "task_id",
        "thread_id",
    )

    def __init__(
        self,
        *,
        graph_name: str,
        node: str,
        run_id: str,
        thread_id: str,
        branch_id: str,
        step: int,
        task_id: str,
        context: Any = NO_CONTEXT,
        cache: dict[str, Any] | None = None,
        emit: Callable[[Any, str], None] | None = None,
        credentials: CredentialsProvider | None = None,
        roles: tuple[str, ...] = (),
        resolved: dict[str, Credentials] | None = None,
        attempt: int = 1,
        memory: MemoryStore | None = None,
        agents: AgentSpawner | None = None,
        streamed: frozenset[str] = frozenset(),
    ) -> None:
        self.graph_name = graph_name
        self.node = node
        self.run_id = run_id
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.step = step
        self.task_id = task_id
        self.cache: dict[str, Any] = cache if cache is not None else {}
        self._context = context
        self._emit = emit
        # A closure, not attributes: no attribute of the context leads to the provider or
        # to the credentials of a role the node does not declare.
        self._credentials = role_lookup(credentials, node, roles, resolved)
        self.attempt = attempt
        self._memory = memory
        self._agents = agents
        self._streamed = streamed

    @property
    def context(self) -> Any:
        """The ``context=`` object of the run; it is never stored.

        Raises:
            ContextNotProvidedError: the run was started without ``context=``.
        """
        if self._context is NO_CONTEXT:
            raise ContextNotProvidedError(
                f"Node '{self.node}' read ctx.context, but the run got no context. Pass "
                f"context=... to invoke/ainvoke/stream/astream (and again when resuming: the "
                f"context is never stored)."
            )
        return self._context

    @property
    def memory(self) -> MemoryStore:
        """The run's long-term memory store, shared by every thread; it is never stored.

        Raises:
            ContextNotProvidedError: neither the graph nor the call was given ``memory=``.
        """
        if self._memory is None:
            raise ContextNotProvidedError(
                f"Node '{self.node}' read ctx.memory, but the run has no memory store. Pass "
                f"memory=... to Graph(...) or to invoke/ainvoke/stream/astream, e.g. "
                f"memory=open_memory('sqlite:///memory.db') (from nodestep.memory)."
            )
        return self._memory

    def credentials(self, role: str) -> Credentials:
        """Return the credentials of ``role``, one of the node's ``@node(roles=[...])``.

        The call's ``credentials=`` provider resolves the role the first time a node of
        the call asks; the call's nodes that declare the role get the same object after
        that. The secret is in
        ``Credentials.secret()``; the object itself prints as its role only.

        Raises:
            CredentialsError: the node does not declare ``role``, the call got no provider,
                or the provider cannot resolve the role. The message names the role and
                the node, never a secret.
        """
        return self._credentials(role)

    async def spawn(self, tasks: AgentTask | Sequence[AgentTask]) -> list[AgentHandle]:
        """Start sub-agents, each on a thread of its own in the run's store; return their handles.

        Each sub-agent's thread id is derived from the run's thread (and branch), this
        task, its superstep and the sub-agent's name and index, so the node running again
        (a continuation after a crash, a resume) finds the same threads: a sub-agent that
        completed is read back, not run again, and an unfinished one continues. Gather
        every handle before the node returns; the node's end, pause or failure cancels
        the sub-agents still running.

        Args:
            tasks: One ``AgentTask`` or a sequence of them.

        Returns:
            One ``AgentHandle`` per task, in order.

        Raises:
            GraphConfigError: a task names an agent the graph does not know (the message
                lists the known names), or gives something that is not an agent.
            GraphExecutionError: called outside a running node.
        """
        return await self._spawner().spawn([tasks] if isinstance(tasks, AgentTask) else tasks)

    async def gather(
        self, handles: Sequence[AgentHandle], *, return_exceptions: bool = False
    ) -> list[AgentResult]:
        """Wait for spawned sub-agents; return their results in the order of ``handles``.

        Every sub-agent is waited for, whatever the others do. Then a sub-agent waiting
        for answers pauses this node: its interrupts surface as the node's, keyed
        ``"<task_id>/<name>#<index>/<key>"``, and the parent's resume answers them and
        continues it.

        Args:
            handles: Handles from ``spawn``.
            return_exceptions: Return failed sub-agents as results with status
                ``"failed"`` instead of raising.

        Returns:
            One ``AgentResult`` per handle, in order.

        Raises:
            AgentGroupError: sub-agents failed (without ``return_exceptions``); it names
                every one, with its thread id.
        """
        return await self._spawner().gather(handles, return_exceptions)

    def _spawner(self) -> AgentSpawner:
        if self._agents is None:
            raise GraphExecutionError(
                f"Node '{self.node}' called ctx.spawn/ctx.gather on a NodeContext made outside "
                f"a run; sub-agents are spawned from a node while its graph runs."
            )
        return self._agents

    def streams(self, mode: str) -> bool:
        """Tell whether the run streams ``mode`` events (``"messages"``, ``"custom"``, ...).

        A node can skip work that only a stream reads: an agent's model node asks for the
        reply token by token only when ``"messages"`` are streamed.
        """
        return mode in self._streamed

    def emit(self, data: Any, mode: str = "custom") -> None:
        """Send ``data`` as a ``"custom"`` or ``"messages"`` event; a no-op unless streamed."""
        if mode != "custom" and mode != "messages":
            raise ValueError(f"ctx.emit takes mode 'custom' or 'messages', got {mode!r}; use one.")
        if self._emit is not None:
            self._emit(data, mode)

    def __repr__(self) -> str:
        return (
            f"NodeContext(node={self.node!r}, step={self.step}, task_id={self.task_id!r}, "
            f"thread_id={self.thread_id!r}, branch_id={self.branch_id!r})"
        )
