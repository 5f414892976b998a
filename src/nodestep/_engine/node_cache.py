"""The node cache: answer a task of a node with ``@node(cache=...)`` from a stored result.

Where entries live: in a ``StateStore``, as records of threads of their own, one thread per
graph, node and key (``nodestep-cache/<graph>/<node>/<key hash>``), each entry one
``node_cache`` record. The graph's ``cache_store`` holds them: a private
``InMemoryStateStore`` by default, or any store, the graph's own included. Building on the
store's ordinary records, rather than on new store methods, makes every store, third-party
ones too, a cache store without a line of code, with the same atomic append, file format
and process sharing as history. A lookup is two calls that cost the same however many
entries a store holds (``last_sequence``, then ``read`` of that one record); a new result
for a key appends one record to the key's thread, so the latest record is the entry.

A hit is recorded in the thread's history like a run of the node, its result marked
``cached``: replay, time travel and forks read the recorded update and never ask the
cache, so they stay deterministic whatever the cache holds later. For a node with private
state the key holds the private state the task reads, and the entry the one it left, so a
hit replays the whole result, the change of private state included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import BaseModel

from nodestep._engine.private_state import read_private
from nodestep._engine.runtime import Runtime
from nodestep._engine.tasks import TaskOutcome
from nodestep._errors import ThreadConflictError
from nodestep._flow.cache_policy import CachePolicy
from nodestep._flow.nodes import Node
from nodestep._state.json import json_in_iteration_order, to_json_value
from nodestep._state.model_form import stored_dump
from nodestep._state.set_order import may_hold_set
from nodestep._superstep.codec import result_from_json, route_to_json
from nodestep._superstep.position import PlannedTask, Route, SendRoute, TaskResult
from nodestep.store import StateStore

__all__ = ["ENTRY_TYPE", "NodeCache", "entry_thread"]

ENTRY_TYPE = "node_cache"
"""The ``type`` of a cache entry record."""

_BRANCH = "main"
_SORTED = orjson.OPT_SORT_KEYS


def _answered(task: PlannedTask, answers: dict[str, Any]) -> bool:
    prefix = f"{task.task_id}:"  # interrupt keys are "<task_id>:<id>"
    return any(key.startswith(prefix) for key in answers)


def _sets_in_order(value: Any, data: Any) -> Any:
    """Return ``data``, the JSON form of ``value``, in one order for every process.

    Why: a set's JSON form lists its items in iteration order, and the order of strings
    in a set follows the process's hash seed (``PYTHONHASHSEED``), so a state with a
    ``set[str]`` field would hash to another key in each process, and a cache shared
    through a file store would never hit. A value that holds a set is keyed on its
    canonical form (``_canonical``), with each set's items sorted; any other value keeps
    the JSON form it always had, so existing entries keep their keys. Whether a model can
    hold a set at all is read from its type once (``_may_hold_set``), so a state without
    set fields pays one cached lookup, not a walk of its values.

    Not ``set_order``'s form (the one history is stored in): this one came first, and
    differs from it (a dict as pairs, numbers by their text), so using it would change
    every key of a value with a set, and users' cached entries would all miss.
    """
    return _canonical(value) if _holds_set(value) else data


def _holds_set(value: Any) -> bool:
    if isinstance(value, set | frozenset):
        return True
    if isinstance(value, BaseModel):
        if not _may_hold_set(type(value)):
            return False
        children: Iterable[Any] = [*value.__dict__.values(), *(value.model_extra or {}).values()]
    elif isinstance(value, dict):
        children = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple):
        children = value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [getattr(value, f.name) for f in dataclasses.fields(value)]
    else:
        return False
    return any(_holds_set(child) for child in children)


@functools.cache
def _may_hold_set(model: type[BaseModel]) -> bool:
    """Whether ``model``'s schema has a set or frozenset anywhere, nested models included.

    (An ``Any`` field cannot hold one in a state: a set does not read back from JSON equal.)
    """
    return may_hold_set(model.__pydantic_core_schema__)


def _dumped(data: Any) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def _canonical(value: Any) -> Any:
    """Return JSON data for ``value`` that is the same in every process: sets sorted, a
    dict as its sorted ``[key, value]`` pairs (keys need not be text), a model or dataclass
    as its fields by name; a leaf in its JSON form."""
    if isinstance(value, set | frozenset):
        return sorted((_canonical(item) for item in value), key=_dumped)
    if isinstance(value, dict):
        pairs = [[_canonical(k), _canonical(v)] for k, v in value.items()]
        return sorted(pairs, key=_dumped)
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    if isinstance(value, BaseModel):
        names = [*value.__dict__, *(value.model_extra or {})]
        return {name: _canonical(getattr(value, name)) for name in names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return to_json_value(value)


def entry_thread(graph: str, node: str, key: str) -> str:
    """Return the id of the store thread that keeps a node's entries for ``key``."""
    return f"nodestep-cache/{graph}/{node}/{key}"


class NodeCache:
    """The cached nodes of one run: looks their tasks up before they run, stores new results.

    Args:
        runtime: The run.
        store: Where the entries live (the graph's ``cache_store``).
    """

    def __init__(self, runtime: Runtime, store: StateStore) -> None:
        self.runtime = runtime
        self.store = store
        self._misses: dict[str, str] = {}  # task id -> entry thread, for tasks that run

    @classmethod
    def of(cls, runtime: Runtime) -> NodeCache | None:
        """Return the run's cache, or ``None`` when no node of the graph has a policy."""
        store = runtime.graph.cache_store
        if store is None or not any(n.cache is not None for n in runtime.nodes.values()):
            return None
        return cls(runtime, store)

    async def answer(self, pending: list[PlannedTask]) -> dict[str, TaskOutcome]:
        """Return outcomes, by task id, of the tasks the cache answers (or whose key failed).

        A hit's outcome holds the stored result marked ``cached``; a task whose key function
        raised gets that error as its outcome, as if its node had raised it. A task resumed
        with answers to its interrupts is neither looked up nor stored: its result depends
        on the answers, which the key does not hold.
        """
        answered: dict[str, TaskOutcome] = {}
        answers = self.runtime.pos.answers
        for task in pending:
            node = self.runtime.nodes.get(task.node)
            if node is None or node.cache is None or _answered(task, answers):
                continue
            try:
                thread = self._thread(node, node.cache, task)
            except Exception as error:
                answered[task.task_id] = TaskOutcome(task, error=error)
                continue
            result = await self._lookup(thread, task)
            if result is None:
                self._misses[task.task_id] = thread
            else:
                answered[task.task_id] = TaskOutcome(task, result=result)
        return answered

    async def keep(self, outcomes: list[TaskOutcome]) -> None:
        """Store the results of the tasks that missed the cache and ran to a result.

        Raises:
            StateStoreError: a result has no JSON form, or the store cannot write.
        """
        misses, self._misses = self._misses, {}
        for outcome in outcomes:
            thread = misses.get(outcome.task.task_id)
            if thread is not None and outcome.result is not None:
                await self._store(thread, outcome.task, outcome.result)

    def _thread(self, node: Node, policy: CachePolicy, task: PlannedTask) -> str:
        """Return the entry thread of ``task``: its key is the state's (or ``policy.key``'s)
        data, and the task's input when its node takes one."""
        runtime = self.runtime
        pos, schema = runtime.pos, runtime.schema
        values = pos.values if task.payload is None else {**pos.values, **task.payload}
        what = f"The cache key of node '{node.name}'"
        if policy.key is None:
            data: Any = schema.values_to_json(values)
            if _may_hold_set(schema.cls):
                data = {name: _sets_in_order(values[name], json) for name, json in data.items()}
        else:
            key = policy.key(schema.instance(values))
            # Not to_json_value: it also orders sets _holds_set does not see (one in a
            # model's Any field), so the key of such a value would change.
            data = _sets_in_order(key, json_in_iteration_order(key, what=what))
        digest = hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))
        if task.input is not None:
            # The task input is what tells two tasks of the node apart on one state: it
            # belongs to every key, the key function's too (which gets only the state). A
            # NUL byte, which JSON text never holds, keeps the two parts apart; a task
            # without an input keeps the key it always had.
            given = json_in_iteration_order(task.input, what=f"{what} (its task input)")
            given = _sets_in_order(task.input, given)
            digest.update(b"\0" + orjson.dumps(given, option=orjson.OPT_SORT_KEYS))
        if node.private_state is not None:
            digest.update(b"\0\0" + orjson.dumps(self._private_key(node), option=_SORTED))
        return entry_thread(runtime.graph.name, node.name, digest.hexdigest())

    def _private_key(self, node: Node) -> Any:
        """Return the JSON data of the private state a task of ``node`` would read.

        Why in the key: the node reads its private state and changes it, so a result, and
        the private state the task leaves (which the entry keeps, see ``_store``), hold for
        that private state only. Keyed on it, a hit on another thread (or a later turn of
        this one) is one whose node would have read the same, and replaying the stored
        change is what running the node would have done. Two NUL bytes keep it apart from
        the task input; a node without private state keeps the key it always had.

        Raises:
            StateStoreError: the stored copy does not fit the node's model any more (the
                task fails with it, as it would when the node ran).
        """
        instance = read_private(node, self.runtime.pos)[0]
        # Its dump, not the stored copy: one form for a node that never changed it, and
        # for a copy an older release stored by alias.
        return _sets_in_order(instance, stored_dump(instance))

    async def _lookup(self, thread: str, task: PlannedTask) -> TaskResult | None:
        store = self.store
        seq = await store.last_sequence(thread, _BRANCH)
        if seq == 0:
            return None
        entry = (await store.read(thread, _BRANCH, start=seq, stop=seq))[0]
        expires = entry.get("expires")
        if expires is not None and self.runtime.graph.clock() >= expires:
            return None
        result = result_from_json(self.runtime.schema, task.task_id, {**entry, "node": task.node})
        result.cached = True
        return result

    async def _store(self, thread: str, task: PlannedTask, result: TaskResult) -> None:
        runtime = self.runtime
        schema, graph = runtime.schema, runtime.graph
        node = runtime.nodes[task.node]
        update, replaced = result.update_json, result.replaced
        if update is None:  # a run without a store has no JSON form of its writes yet
            update, replaced_list = schema.writes_to_json(result.writes)
            replaced = replaced_list or None
        now = graph.clock()
        ttl = node.cache.ttl if node.cache is not None else None
        body: dict[str, Any] = {"type": ENTRY_TYPE, "node": task.node, "update": update}
        if replaced:
            body["replaced"] = replaced
        if result.goto is not None:
            body["goto"] = [route_to_json(self._stored_route(r)) for r in result.goto]
        if result.private is not None:  # a hit replays it: the key holds the one it changed
            body["private"] = result.private
        body["expires"] = None if ttl is None else now + ttl
        seq = await self.store.last_sequence(thread, _BRANCH)
        envelope = {"id": graph.new_id(), "seq": seq + 1, "ts": now, "thread": thread}
        record = {**envelope, "branch": _BRANCH, **body}
        # Another run may store a result for this key first; either one serves.
        with contextlib.suppress(ThreadConflictError):
            await self.store.append(thread, _BRANCH, [record], after=seq)

    def _stored_route(self, route: Route) -> Route:
        """Return ``route`` with the JSON form of its ``Send`` payload (runs without a store
        leave it out)."""
        if not isinstance(route, SendRoute) or route.payload_json is not None:
            return route
        fields = self.runtime.schema.fields
        as_json = {k: fields[k].to_json(v) for k, v in route.payload.items()}
        return SendRoute(route.node, route.payload, as_json)
