"""Sub-agents: a node runs other graphs, each on a thread of its own, and gathers them.

``ctx.spawn`` starts one run per ``AgentTask``; ``ctx.gather`` waits for them. Each
sub-agent runs as a top-level run of its graph (with its own lease) on a thread of the
parent's store, whose id is derived, never drawn at random::

    <parent thread>[~<branch>]:<task path>@<turn>.<step>/<name>#<index>

``turn`` and ``step`` name the parent's superstep (``Position.turn`` counts the branch's
turns), so the task running again in the same superstep (a continuation after a crash,
a retry, a resume) finds the same threads, and a later superstep or turn gets new ones.
A spawn reads each thread first:

1. no history: start it with the task's input;
2. its run completed: read its state back, run nothing;
3. paused: resume it with the parent's answers to its interrupts, or report it paused
   again when they are not all given;
4. unfinished (a crash, a failure): continue it.

Sub-agents run as tasks of the event loop (asyncio) beside the node. The node's end with
handles it never gathered, its pause and its failure cancel those still running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.interrupts import GraphInterrupt, Interrupt, Resume, TaskScope, current_task
from nodestep._engine.positions import load_position
from nodestep._engine.request import RunRequest
from nodestep._engine.results import StreamEvent
from nodestep._engine.runtime import Runtime
from nodestep._engine.step_events import ChildEvents, EventSink
from nodestep._errors import AgentGroupError, GraphConfigError, GraphExecutionError
from nodestep._flow.agent_tasks import NO_CONTEXT, AgentHandle, AgentResult, AgentTask
from nodestep._superstep.position import Position

__all__ = ["SubAgents", "TaskAgents", "agent_graph", "gather_agents", "spawn_agents"]

Execute = Callable[[CompiledGraph, RunRequest, EventSink], Awaitable[StreamEvent]]
_NONE: frozenset[str] = frozenset()


class SubAgents:
    """The spawner of one run's nodes (``AgentSpawner``): it starts and gathers sub-agents.

    Args:
        runtime: The run.
        execute: Runs a graph for one call (``_engine.loop.execute``), given so this
            module does not import the run loop that imports it.
        outer: The place of this run in its parents when it runs as a subgraph
            (``"<task>@<turn>.<step>/"`` per level), so a looped subgraph's sub-agents
            get threads of their own; ``""`` at the top.
    """

    __slots__ = ("execute", "for_nodes", "outer", "runtime")

    def __init__(self, runtime: Runtime, execute: Execute, outer: str = "") -> None:
        self.runtime = runtime
        self.execute = execute
        self.outer = outer
        self.for_nodes = NodeSpawner(self)

    def place(self, task_id: str) -> str:
        """Return the place of task ``task_id`` of the pending superstep, for thread ids."""
        pos = self.runtime.pos
        return f"{self.outer}{task_id}@{pos.turn}.{pos.step}/"

    async def spawn(self, tasks: Sequence[AgentTask]) -> list[AgentHandle]:
        """Start ``tasks`` for the running task; see the module."""
        scope = _scope("ctx.spawn")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise GraphExecutionError(
                f"Node '{scope.node}' spawned sub-agents outside asyncio (on trio?); "
                f"sub-agents run as asyncio tasks. Run the graph on asyncio (invoke, or "
                f"ainvoke under asyncio.run)."
            ) from None
        agents = scope.agents if scope.agents is not None else TaskAgents(scope.node)
        scope.agents = agents
        resolved = [(self._graph(task, scope.node), task) for task in _tasks(tasks)]
        runtime, handles = self.runtime, []
        thread = runtime.thread_id
        if runtime.branch_id != "main":
            thread = f"{thread}~{runtime.branch_id}"
        for graph, task in resolved:
            name = task.name or (task.agent if isinstance(task.agent, str) else graph.name)
            index = agents.counts.get(name, 0)
            agents.counts[name] = index + 1
            thread_id = f"{thread}:{self.place(scope.task_id)}{name}#{index}"
            handle = AgentHandle(name, index, thread_id, None)
            prefix = f"{scope.task_id}/{handle.key}/"
            answers = {
                k[len(prefix) :]: v for k, v in scope.answers.items() if k.startswith(prefix)
            }
            run = _Run(self, graph, task, handle, prefix, answers)
            handle.job = asyncio.ensure_future(run.result())
            agents.handles.append(handle)
            handles.append(handle)
        return handles

    async def gather(
        self, handles: Sequence[AgentHandle], return_exceptions: bool
    ) -> list[AgentResult]:
        """Wait for ``handles``; see ``NodeContext.gather``."""
        scope = _scope("ctx.gather")
        if isinstance(handles, AgentHandle):
            raise TypeError(
                f"ctx.gather takes the list of handles ctx.spawn returned, got the one "
                f"handle {handles.key!r}; pass a list, e.g. ctx.gather([handle]), and read "
                f"its result as results[0]."
            )
        if not isinstance(handles, Sequence):
            raise TypeError(
                f"ctx.gather takes the list of handles ctx.spawn returned, got "
                f"{type(handles).__name__} {handles!r:.60}."
            )
        for handle in handles:
            if not isinstance(handle, AgentHandle):
                raise TypeError(
                    f"ctx.gather takes the handles ctx.spawn returned, got "
                    f"{type(handle).__name__}: {handle!r:.60}."
                )
            handle.gathered = True
        results: list[AgentResult] = list(await asyncio.gather(*(h.job for h in handles)))
        failed = [r for r in results if r.status == "failed"]
        if failed and not return_exceptions:
            raise AgentGroupError(scope.node, failed)
        pending = [i for r in results for i in r.interrupts.values()]
        if pending:
            raise GraphInterrupt(pending[0], *pending[1:])
        return results

    def _graph(self, task: AgentTask, node: str) -> CompiledGraph:
        """Return the compiled graph ``task`` names.

        Raises:
            GraphConfigError: an unknown name (listing the known ones), or no agent.
        """
        agent = task.agent
        if isinstance(agent, str):
            known = self.runtime.graph.agents
            if agent not in known:
                names = ", ".join(f"'{n}'" for n in sorted(known)) or "none"
                raise GraphConfigError(
                    f"Node '{node}' spawned the sub-agent '{agent}', which graph "
                    f"'{self.runtime.graph.name}' does not know. Known names: {names}. "
                    f"Declare it with Graph(..., agents=[...]) or pass the graph itself."
                )
            return known[agent]
        return agent_graph(agent, f"Node '{node}' spawned")


async def spawn_agents(tasks: AgentTask | Sequence[AgentTask]) -> list[AgentHandle]:
    """Start sub-agents from the running node, as ``ctx.spawn`` does, without the context.

    For code that runs inside a node but has no ``NodeContext``, such as an async
    ``@tool``: the node's task is found from the running code.

    Args:
        tasks: One ``AgentTask`` or a sequence of them.

    Returns:
        One ``AgentHandle`` per task, in order.

    Raises:
        GraphExecutionError: called outside a running node.
        GraphConfigError: as ``ctx.spawn`` raises it.
    """
    spawner: SubAgents = _scope("spawn_agents").runtime.agents
    return await spawner.spawn([tasks] if isinstance(tasks, AgentTask) else tasks)


async def gather_agents(
    handles: Sequence[AgentHandle], *, return_exceptions: bool = False
) -> list[AgentResult]:
    """Wait for sub-agents, as ``ctx.gather`` does, without the context.

    Args:
        handles: Handles from ``spawn_agents`` or ``ctx.spawn``.
        return_exceptions: Return failed sub-agents as results instead of raising.

    Returns:
        One ``AgentResult`` per handle, in order.

    Raises:
        AgentGroupError: sub-agents failed (without ``return_exceptions``), each named.
        GraphExecutionError: called outside a running node.
    """
    spawner: SubAgents = _scope("gather_agents").runtime.agents
    return await spawner.gather(handles, return_exceptions)


class NodeSpawner:
    """The spawner a ``NodeContext`` holds: closures over the run's ``SubAgents``.

    Why closures: no attribute path may lead from a node's context to the run, which
    holds the call's credentials provider (see ``NodeContext``); a closure is not an
    attribute.
    """

    __slots__ = ("gather", "spawn")

    def __init__(self, agents: SubAgents) -> None:
        async def spawn(tasks: Sequence[AgentTask]) -> list[AgentHandle]:
            return await agents.spawn(tasks)

        async def gather(
            handles: Sequence[AgentHandle], return_exceptions: bool
        ) -> list[AgentResult]:
            return await agents.gather(handles, return_exceptions)

        self.spawn = spawn
        self.gather = gather


def agent_graph(agent: Any, where: str) -> CompiledGraph:
    """Return the compiled graph of ``agent``: a ``Graph``, or an object with one as ``graph``.

    Raises:
        GraphConfigError: ``agent`` is neither.
    """
    for candidate in (agent, getattr(agent, "graph", None)):
        compile_it = getattr(type(candidate), "__nodestep_agent__", None)
        if compile_it is not None:
            compiled: CompiledGraph = compile_it(candidate)
            return compiled
    raise GraphConfigError(
        f"{where} {type(agent).__name__} {agent!r:.60} as an agent; an agent is a Graph "
        f"with its flow declared, an object with one as .graph, "
        f"or the name of one of Graph(..., agents=[...])."
    )


def _tasks(tasks: Any) -> list[AgentTask]:
    if isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence):
        raise TypeError(
            f"ctx.spawn takes an AgentTask or a list of them, got {type(tasks).__name__}."
        )
    for task in tasks:
        if not isinstance(task, AgentTask):
            raise TypeError(
                f"ctx.spawn takes AgentTask objects, got {type(task).__name__}: wrap it as "
                f"AgentTask(agent, input={{...}})."
            )
    return list(tasks)


def _scope(what: str) -> TaskScope:
    scope = current_task.get()
    if scope is None:
        raise GraphExecutionError(f"{what} can only be called inside a running node.")
    return scope


class TaskAgents:
    """The sub-agents one task spawned, in spawn order, and how many of each name.

    A sub-agent's index counts the task's spawns of its name only, so tools that spawn
    concurrently under names of their own get the same thread ids however they
    interleave.
    """

    __slots__ = ("counts", "handles", "node")

    def __init__(self, node: str) -> None:
        self.node = node
        self.handles: list[AgentHandle] = []
        self.counts: dict[str, int] = {}

    async def finish(self) -> None:
        """The node returned: cancel what it never gathered, and say so.

        Raises:
            GraphExecutionError: naming the handles the node did not gather.
        """
        left = [h for h in self.handles if not h.gathered]
        if left:
            await self.cancel()
            names = ", ".join(f"{h.key} (thread '{h.thread_id}')" for h in left)
            raise GraphExecutionError(
                f"Node '{self.node}' returned without gathering its sub-agents {names}; "
                f"they were cancelled. Await ctx.gather(handles) before the node returns."
            )

    async def cancel(self) -> None:
        """Cancel the sub-agents still running and wait until they stopped."""
        jobs = [h.job for h in self.handles if not h.job.done()]
        for job in jobs:
            job.cancel()
        if jobs:
            # Shielded: the node may be cancelled itself, and its sub-agents must still
            # be stopped before it goes.
            with anyio.CancelScope(shield=True):
                await asyncio.wait(jobs)


class _Run:
    """One sub-agent's run: read its thread, then start, continue, resume or read it back."""

    def __init__(
        self,
        spawner: SubAgents,
        graph: CompiledGraph,
        task: AgentTask,
        handle: AgentHandle,
        prefix: str,
        answers: dict[str, Any],
    ) -> None:
        self.spawner = spawner
        self.graph = graph
        self.task = task
        self.handle = handle
        self.prefix = prefix
        self.answers = answers

    async def result(self) -> AgentResult:
        handle, graph = self.handle, self.graph
        sink = self._sink()
        try:
            req = self._request(None)
            pos = None
            if req.store is not None:
                pos = await load_position(
                    req.store, graph.schema, handle.thread_id, "main", cache=graph.positions
                )
            if pos is None or (pos.status == "idle" and pos.step == 0):
                event = await self.spawner.execute(graph, self._request(self._input()), sink)
                if event.mode == "interrupt":
                    event = await self._answer_fresh(event, sink)
            elif pos.status == "idle":
                return self._done("completed", graph.schema.instance(pos.values))
            elif pos.status == "paused":
                # The superstep's answers may hold those of an earlier pause of the
                # sub-agent too: only its pending interrupts' are passed on.
                given = {k: v for k, v in self.answers.items() if k in pos.interrupts}
                if len(given) < len(pos.interrupts):
                    return self._paused(pos)
                resume = Resume(answers=given)
                event = await self.spawner.execute(graph, self._request(None, resume), sink)
            else:
                event = await self.spawner.execute(graph, req, sink)
        except Exception as error:
            return self._done("failed", None, error)
        if event.mode == "interrupt":
            return self._done("interrupted", event.data.state, None, event.data.interrupts)
        return self._done("completed", event.data.state)

    async def _answer_fresh(self, event: StreamEvent, sink: EventSink) -> StreamEvent:
        """Resume a sub-agent that just started and paused, if the parent holds its answers.

        Why: a branch forked from a paused parent runs its sub-agents on threads of the
        branch, which start afresh and pause on the same interrupts (their keys are
        derived, not drawn); the answers the branch's resume gives them must reach them,
        as they reach a paused sub-agent on the thread the pause was made on.
        """
        pending = event.data.interrupts
        given = {k: v for k, v in self.answers.items() if k in pending}
        if not given or len(given) < len(pending):
            return event
        resume = Resume(answers=given)
        return await self.spawner.execute(self.graph, self._request(None, resume), sink)

    def _sink(self) -> EventSink:
        """Where the run's stream events go: the parent's stream, when it asked for its
        children's (``subgraphs=True``), under the path ``<task>/<name>#<index>``."""
        parent = self.spawner.runtime
        if not (parent.request.subgraphs and parent.request.modes):
            return _SINK
        return ChildEvents(parent.sink, self.prefix.removesuffix("/"))

    def _input(self) -> dict[str, Any]:
        given = self.task.input  # a mapping or None: AgentTask checks it
        return {} if given is None else dict(given)

    def _request(self, input: Any, resume: Resume | None = None) -> RunRequest:
        parent = self.spawner.runtime.request
        context = self.task.context
        return RunRequest(
            input=input,
            thread_id=self.handle.thread_id,
            branch_id="main",
            resume=resume,
            context=parent.context if context is NO_CONTEXT else context,
            store=parent.store,
            modes=parent.modes if parent.subgraphs else _NONE,
            subgraphs=parent.subgraphs,
            # As in a subgraph, breakpoints are not honoured: the parent answers a pause
            # by interrupt keys, and a breakpoint has none.
            interrupt_before=_NONE,
            interrupt_after=_NONE,
            credentials=parent.credentials,
            memory=parent.memory,
            # A crashed parent left its sub-agents' leases held too: wait as it waited.
            wait_for_thread=parent.wait_for_thread,
        )

    def _paused(self, pos: Position) -> AgentResult:
        pending = {k: Interrupt.from_json(v) for k, v in pos.interrupts.items()}
        state = self.graph.schema.instance(pos.values)
        return self._done("interrupted", state, None, pending)

    def _done(
        self,
        status: Any,
        state: Any,
        error: BaseException | None = None,
        pending: Mapping[str, Interrupt] | None = None,
    ) -> AgentResult:
        handle, prefix = self.handle, self.prefix
        keyed = {
            prefix + i.key: Interrupt(prefix + i.key, i.id, i.node, prefix + i.task_id, i.payload)
            for i in (pending or {}).values()
        }
        return AgentResult(handle.name, handle.index, handle.thread_id, status, state, error, keyed)


_SINK = EventSink()
