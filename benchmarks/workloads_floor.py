"""Plain-Python floor: the same node bodies called in a loop, no framework.

These figures are a reference for what the node work itself costs; no engine can
go below them.  State is a dict; an update is merged with ``dict.update`` and the
reducer list is extended, as an engine would.  The ``+io`` variants add the bare
minimum a durable store must do: serialise the step with orjson and write it to an
open file (and, for ``+fsync``, call ``os.fsync``).
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from harness import AsyncDriver, Timed, now_ns


def _inc(state: dict[str, Any]) -> dict[str, Any]:
    return {"n": state["n"] + 1}


async def _ainc(state: dict[str, Any]) -> dict[str, Any]:
    return {"n": state["n"] + 1}


def chain(length: int, driver: AsyncDriver, *, memory_store: bool = False) -> dict[str, Timed]:
    fns = [_inc] * length
    afns = [_ainc] * length

    def run_sync() -> int:
        history: list[dict[str, Any]] = []
        state = {"n": 0}
        t0 = now_ns()
        for f in fns:
            state.update(f(state))
            if memory_store:
                history.append(dict(state))
        dt = now_ns() - t0
        assert state["n"] == length
        return dt

    async def body() -> int:
        history: list[dict[str, Any]] = []
        state = {"n": 0}
        t0 = now_ns()
        for f in afns:
            state.update(await f(state))
            if memory_store:
                history.append(dict(state))
        return now_ns() - t0

    return {"sync": run_sync, "async": lambda: driver.run(body())}


def fanout(width: int, driver: AsyncDriver, joined: bool = False) -> dict[str, Timed]:
    # ``joined`` changes how a graph says "after all of them"; the floor's work is the same.
    def leaf(i: int) -> Any:
        def f(state: dict[str, Any]) -> dict[str, Any]:
            return {"items": [i]}

        return f

    def aleaf(i: int) -> Any:
        async def f(state: dict[str, Any]) -> dict[str, Any]:
            return {"items": [i]}

        return f

    def start(state: dict[str, Any]) -> dict[str, Any]:
        return {"total": 0}

    def join(state: dict[str, Any]) -> dict[str, Any]:
        return {"total": len(state["items"])}

    leaves = [leaf(i) for i in range(width)]
    aleaves = [aleaf(i) for i in range(width)]

    def run_sync() -> int:
        t0 = now_ns()
        state: dict[str, Any] = {"items": [], "total": 0}
        state.update(start(state))
        items = list(state["items"])
        for f in leaves:
            items += f(state)["items"]
        state["items"] = items
        state.update(join(state))
        return now_ns() - t0

    async def body() -> int:
        t0 = now_ns()
        state: dict[str, Any] = {"items": [], "total": 0}
        state.update(start(state))
        items = list(state["items"])
        for f in aleaves:
            items += (await f(state))["items"]
        state["items"] = items
        state.update(join(state))
        return now_ns() - t0

    return {"sync": run_sync, "async": lambda: driver.run(body())}


def durable_loop(target: int, tmpdir: str, *, fsync: bool) -> Timed:
    """Loop body plus one orjson line written (and optionally fsync'ed) per step."""
    path = os.path.join(tmpdir, f"floor-loop-{int(fsync)}.jsonl")

    def run() -> int:
        with open(path, "wb") as fh:
            state = {"n": 0}
            t0 = now_ns()
            while state["n"] < target:
                state.update(_inc(state))
                fh.write(orjson.dumps({"thread": "t", "step": state["n"], "update": state}))
                fh.write(b"\n")
                fh.flush()
                if fsync:
                    os.fsync(fh.fileno())
            dt = now_ns() - t0
        os.remove(path)
        return dt

    return run


def read_jsonl(path: str) -> dict[str, Timed]:
    """Floor for W5: read a file and parse every line with orjson."""

    def history() -> int:
        t0 = now_ns()
        with open(path, "rb") as fh:
            [orjson.loads(line) for line in fh]
        return now_ns() - t0

    return {"history": history}


def chat(history: int, steps: int, messages: list[dict[str, str]]) -> Timed:
    def reply(state: dict[str, Any]) -> dict[str, Any]:
        turn = state["turn"]
        return {
            "messages": [{"role": "assistant", "content": f"reply {turn}"}],
            "turn": turn + 1,
        }

    def run() -> int:
        t0 = now_ns()
        state: dict[str, Any] = {"messages": list(messages), "turn": 0, "user": "u", "topic": "b"}
        for _ in range(steps):
            upd = reply(state)
            state["messages"] = state["messages"] + upd["messages"]
            state["turn"] = upd["turn"]
        return now_ns() - t0

    return run
