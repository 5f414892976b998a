"""100 concurrent sub-agents on one process, with a scripted model.

    python benchmarks/subagents.py [--width 100] [--repeat 5] [--latency 0]

One parent node spawns ``width`` ReAct agents (``create_react_agent`` on a
``ScriptedModel``: one model call each) and gathers them. Beside it, the same agents run
one after another with ``ainvoke``, each on its own thread: the floor of the work itself.
Both on the memory store and on SQLite; each figure is the median of the repetitions.
``--latency`` makes each model call wait that many milliseconds first, as a model
served over the network does: then the sub-agents' waits overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import Field

from nodestep import (
    END,
    START,
    AgentTask,
    BaseState,
    Graph,
    InMemoryStateStore,
    NodeContext,
    ScriptedModel,
    SQLiteStateStore,
    create_react_agent,
    node,
    tool,
)
from nodestep.store import StateStore


class Batch(BaseState):
    answers: list[str] = Field(default_factory=list)


@tool
def clock() -> str:
    """Tell the time; the scripted model never calls it (an agent needs one tool)."""
    return "noon"


class SlowModel(ScriptedModel):
    """A scripted model whose every reply first waits ``latency`` seconds."""

    latency = 0.0

    async def complete(self, messages: Any, tools: Any = ()) -> Any:
        await asyncio.sleep(self.latency)
        return await super().complete(messages, tools)

    async def stream(self, messages: Any, tools: Any = ()) -> AsyncIterator[Any]:
        await asyncio.sleep(self.latency)
        async for chunk in super().stream(messages, tools):
            yield chunk


def _agents(width: int) -> tuple[Graph[Batch], Graph[Any]]:
    agent = create_react_agent(SlowModel(["done"] * width), [clock], name="helper")

    @node
    async def fan_out(state: Batch, ctx: NodeContext) -> dict:
        tasks = [AgentTask(agent, input={"messages": f"job {i}"}) for i in range(width)]
        results = await ctx.gather(await ctx.spawn(tasks))
        return {"answers": [r.state.messages[-1].content for r in results]}  # type: ignore[union-attr]

    return Graph(Batch, name="parent").flow(START >> fan_out, fan_out >> END), agent


async def _spawned(width: int, store: StateStore, run: int) -> float:
    parent, _ = _agents(width)
    started = time.perf_counter()
    result = await parent.ainvoke({}, thread_id=f"p{run}", state_store=store)
    took = time.perf_counter() - started
    assert result.state.answers == ["done"] * width
    return took


async def _one_by_one(width: int, store: StateStore, run: int) -> float:
    _, agent = _agents(width)
    started = time.perf_counter()
    for i in range(width):
        await agent.ainvoke({"messages": f"job {i}"}, thread_id=f"s{run}-{i}", state_store=store)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0, help="ms per model call")
    args = parser.parse_args()
    SlowModel.latency = args.latency / 1000
    with tempfile.TemporaryDirectory() as folder:
        stores = {
            "memory": InMemoryStateStore(),
            "sqlite": SQLiteStateStore(str(Path(folder) / "bench.db")),
        }
        for label, store in stores.items():
            spawned, serial = [], []
            for run in range(args.repeat):
                spawned.append(asyncio.run(_spawned(args.width, store, run)))
                serial.append(asyncio.run(_one_by_one(args.width, store, run)))
            a, b = statistics.median(spawned), statistics.median(serial)
            print(
                f"{label:>6}: {args.width} sub-agents spawned and gathered {a * 1000:7.1f} ms "
                f"({a / args.width * 1e6:5.0f} us each); one by one {b * 1000:7.1f} ms"
            )


if __name__ == "__main__":
    main()
