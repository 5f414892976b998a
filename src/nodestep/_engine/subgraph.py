"""Subgraphs: a compiled graph runs as one task of another graph, in the parent's thread.

A ``SubgraphNode`` is a node whose function runs a child graph. Its task:

1. reads the child's records kept in the parent's position for this task
   (``Position.children``, see ``_superstep.nested``) and folds them with the child's
   schema into the child's position: ``None`` the first time, else where the child run
   stopped (paused, failed, cut off by a kill);
2. starts the child run (the parent's state mapped in), continues its unfinished
   superstep, or resumes it with the parent's answers whose keys start with
   ``"<task_id>/"``: finished child tasks never run again;
3. runs the child's supersteps with the run loop, storing its records through a
   ``ChildWriter`` in the parent's thread;
4. returns the child's final state mapped out as the task's update; or pauses the task
   with the child's interrupts, keyed ``"<task_id>/<child key>"``; or, when a child node
   returned ``Command(graph=PARENT, ...)``, returns that command as its own.

The child's supersteps count against the child graph's own ``max_steps`` and ``timeout``;
the parent counts the whole child run as one task of one superstep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import orjson
from pydantic import BaseModel

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.handoff import ParentCommand
from nodestep._engine.interrupts import GraphInterrupt, Interrupt, Resume, current_task
from nodestep._engine.loop import RunLoop
from nodestep._engine.middleware_nodes import Ending, child_with_hooks
from nodestep._engine.observe import run_watch
from nodestep._engine.request import RunRequest
from nodestep._engine.results import StreamEvent
from nodestep._engine.runtime import Runtime
from nodestep._engine.step_events import ChildEvents
from nodestep._engine.subagents import SubAgents
from nodestep._engine.subgraph_map import StateMap
from nodestep._engine.subgraph_writer import ChildWriter
from nodestep._engine.turns import open_turn
from nodestep._errors import GraphExecutionError
from nodestep._flow.nodes import Node
from nodestep._superstep.position import Position
from nodestep._superstep.replay import replay

__all__ = ["SubgraphNode"]

_NONE: frozenset[str] = frozenset()


class SubgraphNode(Node):
    """A node that runs a compiled child graph as its task.

    Attributes:
        child: The child graph, compiled.
        state_map: Which state flows into the child and back (``_engine.subgraph_map``).
    """

    __slots__ = ("child", "state_map")

    def __init__(
        self,
        name: str,
        child: CompiledGraph,
        state_map: StateMap,
        goto: Sequence[Any] | None = None,
        defer: bool = False,
    ) -> None:
        async def run_subgraph(state: Any) -> Any:
            return await run_child(self, state)

        super().__init__(run_subgraph, name=name, goto=goto, defer=defer)
        self.child = child
        self.state_map = state_map

    def __repr__(self) -> str:
        return f"<subgraph {self.name}: graph {self.child.name!r}>"


async def run_child(node: SubgraphNode, view: BaseModel) -> Any:
    """Run (or continue, or resume) the child graph of the current task; see the module.

    Returns:
        The task's update (a dict), or the ``Command`` a child node handed to the parent.

    Raises:
        GraphInterrupt: the child paused; it carries every pending child interrupt, keyed
            ``"<task_id>/<child key>"``.
        GraphExecutionError: the node's function was called outside a run.
    """
    scope = current_task.get()
    if scope is None or scope.runtime is None:
        raise GraphExecutionError(
            f"Subgraph node '{node.name}' runs graph '{node.child.name}' only as a node of a "
            f"running graph; call invoke() on the graph, not the node's function."
        )
    parent: Runtime = scope.runtime
    task_id = scope.task_id
    child = node.child
    kept = parent.pos.children.get(task_id)
    pos = replay(child.schema, kept) if kept else None
    if pos is not None and pos.status == "idle":
        if pos.step:
            # The child run completed before the parent stored the task's end: its state.
            final = child.schema.instance(pos.values)
            return node.state_map.output(parent.schema, _started_from(node, kept, view), final)
        pos = None  # only the child's first checkpoint (a fork there): it has not started
    resume = None
    if pos is not None and pos.status == "paused":
        answers = _answers(pos, scope.answers, f"{task_id}/")
        if len(answers) < len(pos.interrupts):
            raise _paused(task_id, [Interrupt.from_json(i) for i in pos.interrupts.values()])
        resume = Resume(answers=answers)
    elif pos is not None and pos.status == "failed" and pos.interrupts:
        resume = _new_answers(pos, scope.answers, f"{task_id}/")
    req = _request(parent, node, view, pos, resume)
    try:
        run = partial(_run, parent, task_id, child, req, pos)
        event = await child_with_hooks(child.middleware, child.name, req, run)
    except ParentCommand as handoff:
        return handoff.command
    if event.mode == "interrupt":
        return _raise_pause(task_id, child, event)
    base = view if pos is None else _started_from(node, kept, view)
    return node.state_map.output(parent.schema, base, event.data.state)


def _started_from(
    node: SubgraphNode, kept: list[dict[str, Any]] | None, view: BaseModel
) -> BaseModel:
    """Return the state the child run started from: what its changes are measured against.

    Why not the parent's state now: ``update_state`` may change the parent while the child
    is paused, and the child's update is what *the child* changed since its input, laid
    over the parent's state as it is then. Measured against the parent's state now, every
    field the edit touched would read as changed by the child and be written back, undoing
    the edit (a plain field set back, an ``add`` list replaced without the edit's items).
    The child's records hold its input (``run_started``); ``view`` serves when they do not,
    and with ``state_in=``, whose input is not the parent's state (a fresh run measures
    against ``view`` then too, and a resumed one must agree with it).
    """
    if node.state_map.state_in is not None:
        return view
    starts = [
        i
        for i, body in enumerate(kept or ())
        if body.get("type") == "run_started" and "input" in body
    ]
    if not kept or not starts:
        return view
    started = replay(node.child.schema, kept[: starts[-1] + 1])
    return view if started is None else node.child.schema.instance(started.values)


def _answers(pos: Position, given: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Return the parent's answers to the child's open interrupts, by the child's keys.

    Those of a failed child's tasks that finished take none (``Position.open_interrupts``):
    the parent, which does not see them finish, holds answers to them too.
    """
    waiting = pos.open_interrupts()
    out = {}
    for key, value in given.items():
        if key.startswith(prefix) and key[len(prefix) :] in waiting:
            out[key[len(prefix) :]] = value
    return out


def _new_answers(pos: Position, given: Mapping[str, Any], prefix: str) -> Resume | None:
    """Return the parent's answers to a failed child that differ from the child's own.

    A child fails after its interrupts were answered when a node cannot take its answer.
    The parent, resumed with new answers, holds them; the child, failed and not paused,
    would be continued with the answers it stored, and fail again. So new answers resume
    it (they replace its own, as on a thread of its own); the same ones continue it.
    """
    answers = _answers(pos, given, prefix)
    waiting = pos.open_interrupts()
    if not waiting or len(answers) < len(waiting):
        return None  # not failed on its answers (``turns._check_answers`` would refuse them)
    kept = {key: pos.answers[key] for key in answers}
    # Compared as JSON: an answer True is not the answer 1 it equals in Python.
    return None if _json(kept) == _json(answers) else Resume(answers=answers)


def _json(answers: dict[str, Any]) -> bytes:
    return orjson.dumps(answers, option=orjson.OPT_SORT_KEYS)


def _request(
    parent: Runtime, node: SubgraphNode, view: BaseModel, pos: Position | None, resume: Any
) -> RunRequest:
    req = parent.request
    # The child's static breakpoints are not honoured: a pause of the parent is answered
    # by interrupt keys, and a breakpoint has none. ``interrupt()`` in a child node pauses.
    return RunRequest(
        input=node.state_map.input(view) if pos is None else None,
        thread_id=parent.thread_id,
        branch_id=parent.branch_id,
        resume=resume,
        context=parent.context,
        store=req.store,
        memory=req.memory,
        modes=req.modes if req.subgraphs else _NONE,
        interrupt_before=_NONE,
        interrupt_after=_NONE,
        subgraphs=req.subgraphs,
        # The call's provider reaches the child's nodes; each still sees only its roles.
        credentials=req.credentials,
    )


async def _run(
    parent: Runtime,
    task_id: str,
    child: CompiledGraph,
    req: RunRequest,
    pos: Position | None,
    ending: Ending | None,
) -> StreamEvent:
    run_id = child.hex_id()
    turn = open_turn(child, pos, req, parent.thread_id, run_id)
    writer = None
    if parent.writer is not None:
        writer = ChildWriter(parent.writer, task_id, child.schema, turn.pos, child.new_id)
        await writer.commit(turn.records)
    runtime = Runtime(
        child, req, run_id=run_id, thread_id=parent.thread_id, writer=writer, pos=turn.pos
    )
    runtime.path = (*parent.path, task_id)
    # One call, one set of resolved credentials: a role resolves once, and the parent masks
    # the secrets the child's nodes were given when it stores the child's failure as its own.
    runtime.resolved = parent.resolved
    outer: SubAgents = parent.agents
    runtime.agents = SubAgents(runtime, outer.execute, outer.place(task_id))
    sink = ChildEvents(parent.sink, task_id)
    watch = run_watch(child.name, parent.thread_id, parent.branch_id, run_id)
    if watch is None:
        return await RunLoop(runtime, req, turn.continuing, sink, ending).run()
    # The child's spans nest under its task's span, the current one.
    runtime.watch, watch.masked = watch, runtime.stored_error
    watch.started(turn.continuing)
    try:
        event = await RunLoop(runtime, req, turn.continuing, sink, ending).run()
    except BaseException as error:
        watch.raised(error)
        raise
    watch.ended("completed" if event.mode == "final" else "paused")
    return event


def _raise_pause(task_id: str, child: CompiledGraph, event: StreamEvent) -> Any:
    pending = list(event.data.interrupts.values())
    if not pending:  # pragma: no cover - the child runs without breakpoints
        raise GraphExecutionError(
            f"Internal error of nodestep: subgraph '{child.name}' of task '{task_id}' "
            f"stopped without an interrupt. Please report it."
        )
    raise _paused(task_id, pending)


def _paused(task_id: str, pending: list[Interrupt]) -> GraphInterrupt:
    """Return the pause of the parent task: the child's interrupts under the task's path."""
    prefix = f"{task_id}/"
    keyed = [
        Interrupt(prefix + i.key, i.id, i.node, prefix + i.task_id, i.payload) for i in pending
    ]
    return GraphInterrupt(keyed[0], *keyed[1:])
