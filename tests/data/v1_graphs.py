"""The graphs of the format version 1 fixture, ``history_v1.jsonl``.

``make_history_v1.py`` runs them with the previous nodestep release to write the fixture;
``tests/store/test_format_versions.py`` loads them with this one to read it. They use only
the public API both releases share, so keep it that way: no ``id_factory=``/``clock=``
arguments (the generator injects those the old way) and nothing added since.

Each thread of the fixture names its graph in ``THREADS``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    NodeContext,
    Send,
    add,
    interrupt,
    node,
    when,
)
from nodestep import Replace as Replace  # re-exported for the generator and the test

FAILING: set[str] = set()
"""Threads whose ``flaky`` task raises; the generator fills it, the test leaves it empty."""


# -- chain: single-task supersteps, when(), Replace, a breakpoint ---------------------------


class Chain(BaseState):
    n: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


@node
def step_a(state: Chain) -> dict[str, Any]:
    return {"n": state.n + 1, "log": [f"a{state.n + 1}"]}


@node
def step_b(state: Chain) -> dict[str, Any]:
    return {"log": Replace([f"b{state.n}", *state.log[-1:]]), "note": f"b saw {state.n}"}


# -- review: Send fan-out, Command goto in a task, a pause with ctx.cache -------------------


class Review(BaseState):
    topic: str = ""
    drafts: Annotated[list[str], add] = Field(default_factory=list)
    verdict: str = ""


@node
async def review(state: Review, ctx: NodeContext) -> dict[str, Any]:
    if "count" not in ctx.cache:
        ctx.cache["count"] = len(state.drafts)
    verdict = interrupt({"drafts": state.drafts, "count": ctx.cache["count"]}, id="verdict")
    return {"verdict": f"{verdict} ({ctx.cache['count']} drafts)"}


@node(goto=[review])
async def write(state: Review) -> Command:
    return Command(update={"drafts": [f"a post on {state.topic}"]}, goto=review)


@node(goto=[write])
def plan(state: Review) -> Command:
    return Command(goto=[Send(write, {"topic": topic}) for topic in ("tea", "cake")])


# -- launch: several interrupts in one superstep, a sibling that finishes ------------------


class Launch(BaseState):
    sign_offs: Annotated[list[str], add] = Field(default_factory=list)
    notes: str = ""


@node
async def legal(state: Launch) -> dict[str, Any]:
    return {"sign_offs": [f"legal: {interrupt('legal ok?', id='sign_off')}"]}


@node
async def security(state: Launch) -> dict[str, Any]:
    return {"sign_offs": [f"security: {interrupt({'scope': 'audit'}, id='sign_off')}"]}


@node
async def release_notes(state: Launch) -> dict[str, Any]:
    return {"notes": "v2.0: faster checkout"}


@node(goto=[legal, security, release_notes])
def submit(state: Launch) -> Command:
    return Command(goto=[legal, security, release_notes])


# -- job: a task fails beside one that succeeds; a merge conflict blocks -------------------


class Job(BaseState):
    results: Annotated[list[str], add] = Field(default_factory=list)
    winner: str = ""
    attempts: int = 0


@node
async def steady(state: Job) -> dict[str, Any]:
    return {"results": ["steady"]}


@node
async def flaky(state: Job, ctx: NodeContext) -> dict[str, Any]:
    if ctx.thread_id in FAILING:
        raise RuntimeError(f"flaky failed on {ctx.thread_id}")
    return {"results": ["flaky"]}


@node
async def left(state: Job) -> dict[str, Any]:
    return {"winner": "left"}


@node
async def right(state: Job) -> dict[str, Any]:
    return {"winner": "right"}


@node(goto=[steady, flaky, left, right])
def dispatch(state: Job) -> Command:
    if state.attempts > 0:  # the second turn writes one plain field from two tasks
        return Command(goto=[left, right])
    return Command(update={"attempts": 1}, goto=[steady, flaky])


# -- counter: a thread long enough for checkpoints after every 50 records ------------------


class Counter(BaseState):
    n: int = 0


@node(goto=["count", END])
def count(state: Counter) -> Command:
    return Command(update={"n": state.n + 1}, goto="count" if state.n < 119 else END)


# -- building them ---------------------------------------------------------------------------


def build(name: str, store: Any) -> Graph[Any]:
    """Return the graph ``name`` of ``GRAPHS`` on ``store``."""
    if name == "chain":
        return Graph(Chain, name="chain", state_store=store).flow(
            START >> step_a, step_a >> step_b, step_b >> when(lambda s: s.n < 3, step_a, END)
        )
    if name == "review":
        return Graph(Review, name="review", state_store=store).flow(START >> plan, review >> END)
    if name == "launch":
        return Graph(Launch, name="launch", state_store=store).flow(
            START >> submit, legal >> END, security >> END, release_notes >> END
        )
    if name == "job":
        return Graph(Job, name="job", state_store=store).flow(
            START >> dispatch, steady >> END, flaky >> END, left >> END, right >> END
        )
    if name == "counter":
        return Graph(Counter, name="counter", max_steps=200, state_store=store).flow(START >> count)
    raise KeyError(name)


GRAPHS = ("chain", "review", "launch", "job", "counter")

THREADS = {
    "chain": "chain",  # a breakpoint stop, a continuation, Replace in input and update_state
    "chain-closed": "chain",  # a stream closed early: left stopped
    "chain-after": "chain",  # left stopped by a breakpoint after a node
    "review-done": "review",  # paused, edited, resumed; forked into branch "retry"
    "review-paused": "review",  # left paused
    "launch-done": "launch",  # two interrupts answered together
    "launch-paused": "launch",  # left paused with two interrupts and a finished sibling
    "job-continued": "job",  # a failed task continued; then a blocked merge
    "job-failed": "job",  # left failed
    "counter": "counter",  # 120 supersteps: checkpoints at records 1, 52 and 103
}
"""Every thread of the fixture, and the graph it ran."""
