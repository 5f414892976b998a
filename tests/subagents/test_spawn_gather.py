"""Sub-agents spawned from a node: results in order, failures named, interrupts, cancellation."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    AgentGroupError,
    AgentTask,
    BaseState,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    InMemoryStateStore,
    NodeContext,
    Resume,
    add,
    interrupt,
    node,
)


class Job(BaseState):
    text: str = ""
    out: str = ""


class Boss(BaseState):
    texts: list[str] = Field(default_factory=list)
    outs: Annotated[list[str], add] = Field(default_factory=list)


runs: list[str] = []


@node
async def shout(state: Job) -> dict:
    runs.append(state.text)
    if state.text == "boom":
        raise ValueError(f"cannot shout {state.text!r}")
    await asyncio.sleep(0.001 * (3 - len(state.text) % 3))  # finish out of spawn order
    return {"out": state.text.upper()}


shouter = Graph(Job, name="shouter").flow(START >> shout, shout >> END)


@node
def ask(state: Job) -> dict:
    runs.append(f"ask {state.text}")
    return {"out": interrupt({"word": state.text}, id="ok")}


asker = Graph(Job, name="asker").flow(START >> ask, ask >> END)


def boss(dispatch: object, store: InMemoryStateStore | None = None) -> Graph[Boss]:
    return Graph(Boss, agents=[shouter, asker], state_store=store).flow(
        START >> dispatch, dispatch >> END
    )


@node
async def fan_out(state: Boss, ctx: NodeContext) -> dict:
    handles = await ctx.spawn([AgentTask("shouter", input={"text": t}) for t in state.texts])
    results = await ctx.gather(handles)
    return {"outs": [r.state.out for r in results]}


@pytest.fixture(autouse=True)
def forget_runs() -> None:
    runs.clear()


def test_gather_returns_results_in_spawn_order() -> None:
    result = boss(fan_out).invoke({"texts": ["a", "bb", "ccc", "dddd"]})
    assert result.state.outs == ["A", "BB", "CCC", "DDDD"]
    assert sorted(runs) == ["a", "bb", "ccc", "dddd"]


def test_sub_agents_run_on_threads_derived_from_the_parent_task() -> None:
    store = InMemoryStateStore()
    seen: list[str] = []

    @node
    async def dispatch(state: Boss, ctx: NodeContext) -> dict:
        handles = await ctx.spawn([AgentTask(shouter, input={"text": "x"}, name="loud")])
        seen.extend(h.thread_id for h in handles)
        return {"outs": [r.state.out for r in await ctx.gather(handles)]}

    graph = boss(dispatch, store)
    graph.invoke({}, thread_id="t")
    graph.invoke({}, thread_id="t")
    assert seen == ["t:dispatch@1.0/loud#0", "t:dispatch@2.0/loud#0"]
    assert runs == ["x", "x"]  # the second turn got a thread of its own: it ran again


def test_a_failed_sub_agent_is_named_with_its_thread_in_one_error() -> None:
    graph = boss(fan_out, InMemoryStateStore())
    with pytest.raises(AgentGroupError) as caught:
        graph.invoke({"texts": ["ok", "boom", "fine"]}, thread_id="t")
    error = caught.value
    assert [(f.name, f.index, f.thread_id) for f in error.failures] == [
        ("shouter", 1, "t:fan_out@1.0/shouter#1")
    ]
    assert "shouter#1 (thread 't:fan_out@1.0/shouter#1'): ValueError: cannot shout 'boom'" in str(
        error
    )
    assert sorted(runs) == ["boom", "fine", "ok"]  # the others ran to their end


def test_return_exceptions_hands_failures_to_the_node() -> None:
    @node
    async def lenient(state: Boss, ctx: NodeContext) -> dict:
        handles = await ctx.spawn([AgentTask("shouter", input={"text": t}) for t in state.texts])
        results = await ctx.gather(handles, return_exceptions=True)
        return {"outs": [r.state.out if r.ok else f"{r.status}: {r.error}" for r in results]}

    result = boss(lenient).invoke({"texts": ["boom", "hi"]})
    assert result.state.outs == ["failed: cannot shout 'boom'", "HI"]


def test_an_unknown_agent_name_is_refused_with_the_known_names() -> None:
    @node
    async def lost(state: Boss, ctx: NodeContext) -> dict:
        await ctx.spawn(AgentTask("writer"))
        return {}

    with pytest.raises(GraphConfigError, match="'writer', which graph 'graph' does not know"):
        try:
            boss(lost).invoke({})
        except GraphConfigError as error:
            assert "Known names: 'asker', 'shouter'" in str(error)
            raise


def test_something_that_is_not_an_agent_is_refused() -> None:
    with pytest.raises(GraphConfigError, match="an agent is a Graph with its flow declared"):
        Graph(Boss, agents=[len]).flow(START >> fan_out, fan_out >> END)
    with pytest.raises(GraphConfigError, match="two sub-agents named 'shouter'"):
        Graph(Boss, agents=[shouter, shouter]).flow(START >> fan_out, fan_out >> END)


def test_spawn_refuses_what_is_not_an_agent_task() -> None:
    @node
    async def wrong(state: Boss, ctx: NodeContext) -> dict:
        await ctx.spawn(["shouter"])  # type: ignore[list-item]
        return {}

    with pytest.raises(TypeError, match=r"ctx\.spawn takes AgentTask objects, got str"):
        boss(wrong).invoke({})


def test_sub_agent_interrupts_pause_the_parent_and_its_resume_continues_them() -> None:
    store = InMemoryStateStore()

    @node
    async def mixed(state: Boss, ctx: NodeContext) -> dict:
        tasks = [AgentTask("shouter", input={"text": "done"})]
        tasks += [AgentTask("asker", input={"text": t}) for t in ("x", "y")]
        results = await ctx.gather(await ctx.spawn(tasks))
        return {"outs": [r.state.out for r in results]}

    graph = boss(mixed, store)
    paused = graph.invoke({}, thread_id="t")
    assert paused.status == "interrupted"
    assert sorted(paused.interrupts) == ["mixed/asker#0/ask:ok", "mixed/asker#1/ask:ok"]
    assert paused.interrupts["mixed/asker#0/ask:ok"].payload == {"word": "x"}
    answers = {"mixed/asker#0/ask:ok": "yes", "mixed/asker#1/ask:ok": "no"}
    done = graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    assert done.state.outs == ["DONE", "yes", "no"]
    # The shouter completed before the pause: read back, not run again.
    assert runs.count("done") == 1
    assert sorted(r for r in runs if r.startswith("ask")) == ["ask x", "ask x", "ask y", "ask y"]


def test_a_failing_node_cancels_its_running_sub_agents() -> None:
    started, cancelled = asyncio.Event(), []

    @node
    async def forever(state: Job) -> dict:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(state.text)
            raise
        return {}

    sleeper = Graph(Job, name="sleeper").flow(START >> forever, forever >> END)

    @node
    async def impatient(state: Boss, ctx: NodeContext) -> dict:
        await ctx.spawn(AgentTask(sleeper, input={"text": "z"}))
        await started.wait()
        raise RuntimeError("the parent gives up")

    with pytest.raises(RuntimeError, match="the parent gives up"):
        asyncio.run(boss(impatient).ainvoke({}))
    assert cancelled == ["z"]


def test_a_node_that_returns_without_gathering_fails_and_cancels_them() -> None:
    @node
    async def careless(state: Boss, ctx: NodeContext) -> dict:
        await ctx.spawn(AgentTask("shouter", input={"text": "q"}))
        return {}

    with pytest.raises(GraphExecutionError, match="returned without gathering its sub-agents"):
        boss(careless, InMemoryStateStore()).invoke({}, thread_id="t")


def test_a_context_made_outside_a_run_cannot_spawn() -> None:
    ctx = NodeContext(
        graph_name="g", node="n", run_id="r", thread_id="t", branch_id="main", step=0, task_id="n"
    )
    with pytest.raises(GraphExecutionError, match="NodeContext made outside a run"):
        asyncio.run(ctx.spawn(AgentTask("shouter")))


def test_one_hundred_sub_agents_run_concurrently() -> None:
    width = 100
    inside, most = [0], [0]

    @node
    async def wait_a_bit(state: Job) -> dict:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        inside[0] -= 1
        return {"out": state.text}

    worker = Graph(Job, name="worker").flow(START >> wait_a_bit, wait_a_bit >> END)

    @node
    async def hundred(state: Boss, ctx: NodeContext) -> dict:
        tasks = [AgentTask(worker, input={"text": str(i)}) for i in range(width)]
        return {"outs": [r.state.out for r in await ctx.gather(await ctx.spawn(tasks))]}

    result = boss(hundred, InMemoryStateStore()).invoke({}, thread_id="t")
    assert result.state.outs == [str(i) for i in range(width)]
    assert most[0] == width


def test_the_index_counts_each_name_on_its_own() -> None:
    seen: list[str] = []

    @node
    async def two_kinds(state: Boss, ctx: NodeContext) -> dict:
        first = await ctx.spawn([AgentTask(shouter, name="a"), AgentTask(shouter, name="b")])
        second = await ctx.spawn(AgentTask(shouter, name="a"))
        seen.extend(h.key for h in first + second)
        await ctx.gather(first + second)
        return {}

    boss(two_kinds).invoke({})
    assert seen == ["a#0", "b#0", "a#1"]


def test_a_tool_spawns_and_gathers_without_a_context() -> None:
    from nodestep import ScriptedModel, ScriptedReply, create_react_agent
    from nodestep.agents import gather_agents, spawn_agents, tool

    @tool
    async def shout_all(words: list[str]) -> str:
        """Shout each word, one sub-agent a word.

        Args:
            words: The words.
        """
        tasks = [AgentTask(shouter, input={"text": w}, name=f"shout_{w}") for w in words]
        results = await gather_agents(await spawn_agents(tasks))
        return " ".join(r.state.out for r in results)

    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("shout_all", {"words": ["hi", "yo"]})]),
            ScriptedReply("done", expect="HI YO"),
        ]
    )
    store = InMemoryStateStore()
    agent = create_react_agent(model, [shout_all], state_store=store)
    result = agent.invoke({"messages": "shout"}, thread_id="chat")
    assert result.state.messages[-1].content == "done"
    assert sorted(runs) == ["hi", "yo"]


def test_tools_of_one_reply_whose_sub_agents_pause_pause_the_parent_with_each() -> None:
    from nodestep import ScriptedModel, ScriptedReply, create_react_agent
    from nodestep.agents import ToolMessage, gather_agents, spawn_agents, tool

    @tool
    async def confirm(word: str) -> str:
        """Have a person confirm a word.

        Args:
            word: The word.
        """
        task = AgentTask(asker if word != "hi" else shouter, input={"text": word}, name="check")
        return (await gather_agents(await spawn_agents(task)))[0].state.out

    calls = [("confirm", {"word": w}) for w in ("x", "hi", "y")]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), "done"])
    agent = create_react_agent(model, [confirm], state_store=InMemoryStateStore())
    paused = agent.invoke({"messages": "go"}, thread_id="t")
    # Each call counts its own sub-agents, under its id: one name never meets another call's.
    assert {key: i.payload for key, i in paused.interrupts.items()} == {
        "tools/call-1-1/check#0/ask:ok": {"word": "x"},
        "tools/call-1-3/check#0/ask:ok": {"word": "y"},
    }
    answers = {"tools/call-1-1/check#0/ask:ok": "yes", "tools/call-1-3/check#0/ask:ok": "no"}
    done = agent.invoke(None, thread_id="t", resume=Resume(answers=answers))
    assert done.status == "completed"
    replies = [m.content for m in done.state.messages if isinstance(m, ToolMessage)]
    assert replies == ["yes", "HI", "no"]
    assert runs.count("hi") == 1  # the call that finished before the pause ran once


def test_spawn_agents_outside_a_node_is_refused() -> None:
    from nodestep.agents import spawn_agents

    with pytest.raises(GraphExecutionError, match="spawn_agents can only be called inside"):
        asyncio.run(spawn_agents(AgentTask(shouter)))


def test_a_sub_agent_of_a_subgraph_node_pauses_and_resumes_through_both_levels() -> None:
    seen: list[str] = []

    @node
    async def ask_one(state: Boss, ctx: NodeContext) -> dict:
        handles = await ctx.spawn(AgentTask(asker, input={"text": "deep"}))
        seen.extend(h.thread_id for h in handles)
        return {"outs": [r.state.out for r in await ctx.gather(handles)]}

    inner = Graph(Boss, name="inner").flow(START >> ask_one, ask_one >> END)
    outer = Graph(Boss, name="outer", state_store=InMemoryStateStore()).flow(
        START >> inner, inner >> END
    )
    paused = outer.invoke({}, thread_id="t")
    assert list(paused.interrupts) == ["inner/ask_one/asker#0/ask:ok"]
    done = outer.invoke(None, thread_id="t", resume=Resume("deep answer"))
    assert done.state.outs == ["deep answer"]
    assert set(seen) == {"t:inner@1.0/ask_one@1.0/asker#0"}
    assert runs == ["ask deep", "ask deep"]  # asked, then answered on resume


def test_a_sub_agent_that_asks_twice_pauses_the_parent_twice() -> None:
    @node
    def two_questions(state: Job) -> dict:
        first = interrupt("first?", id="one")
        second = interrupt("second?", id="two")
        return {"out": f"{first}+{second}"}

    curious = Graph(Job, name="curious").flow(START >> two_questions, two_questions >> END)

    @node
    async def ask_twice(state: Boss, ctx: NodeContext) -> dict:
        results = await ctx.gather(await ctx.spawn(AgentTask(curious)))
        return {"outs": [r.state.out for r in results]}

    graph = boss(ask_twice, InMemoryStateStore())
    first = graph.invoke({}, thread_id="t")
    assert list(first.interrupts) == ["ask_twice/curious#0/two_questions:one"]
    second = graph.invoke(None, thread_id="t", resume=Resume("a"))
    assert list(second.interrupts) == ["ask_twice/curious#0/two_questions:two"]
    done = graph.invoke(None, thread_id="t", resume=Resume("b"))
    assert done.state.outs == ["a+b"]


def test_a_pause_of_the_node_cancels_its_sub_agents_and_the_resume_continues_them() -> None:
    store = InMemoryStateStore()
    started, go, cancelled = asyncio.Event(), asyncio.Event(), []

    @node
    async def first(state: Job) -> dict:
        runs.append("first")
        return {"out": "1"}

    @node
    async def second(state: Job) -> dict:
        runs.append("second")
        started.set()
        try:
            await go.wait()
        except asyncio.CancelledError:
            cancelled.append("second")
            raise
        return {"out": state.out + "2"}

    two_steps = Graph(Job, name="two_steps").flow(START >> first, first >> second, second >> END)

    @node
    async def check_in(state: Boss, ctx: NodeContext) -> dict:
        handles = await ctx.spawn(AgentTask(two_steps))
        await started.wait()
        interrupt("go on?", id="go")  # pauses while the sub-agent runs
        go.set()
        return {"outs": [r.state.out for r in await ctx.gather(handles)]}

    async def scenario() -> list[str]:
        graph = boss(check_in, store)
        paused = await graph.ainvoke({}, thread_id="t")
        assert list(paused.interrupts) == ["check_in:go"]
        assert cancelled == ["second"]
        done = await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
        return list(done.state.outs)

    assert asyncio.run(scenario()) == ["12"]
    assert runs == ["first", "second", "second"]  # first stayed done; second continued


def test_spawn_on_trio_says_sub_agents_need_asyncio() -> None:
    import anyio

    @node
    async def on_trio(state: Boss, ctx: NodeContext) -> dict:
        await ctx.spawn(AgentTask(shouter))
        return {}

    async def run() -> None:
        await boss(on_trio).ainvoke({})

    with pytest.raises(GraphExecutionError, match="sub-agents run as asyncio tasks"):
        anyio.run(run, backend="trio")


def test_without_a_store_a_sub_agent_interrupt_fails_it_with_the_reason() -> None:
    @node
    async def ask_one(state: Boss, ctx: NodeContext) -> dict:
        results = await ctx.gather(await ctx.spawn(AgentTask(asker)), return_exceptions=True)
        return {"outs": [f"{r.status}: {r.error}" for r in results]}

    outs = boss(ask_one).invoke({}).state.outs
    assert outs[0].startswith("failed: Node 'ask' called interrupt(id='ok'), but the run has no")


def test_an_agent_task_refuses_an_input_or_name_that_cannot_work() -> None:
    with pytest.raises(TypeError, match=r"takes a dict of the agent's state fields, got str"):
        AgentTask(shouter, input="hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AgentTask\(name=\.\.\.\) takes a non-blank string"):
        AgentTask(shouter, name=" ")


def test_agents_by_a_dict_of_names_and_objects_that_hold_a_graph() -> None:
    class Holder:
        graph = shouter

    @node
    async def by_alias(state: Boss, ctx: NodeContext) -> dict:
        handles = await ctx.spawn(
            [AgentTask("loud", input={"text": "a"}), AgentTask(Holder(), input={"text": "b"})]
        )
        return {"outs": [f"{r.name}={r.state.out}" for r in await ctx.gather(handles)]}

    graph = Graph(Boss, agents={"loud": Holder()}).flow(START >> by_alias, by_alias >> END)
    assert graph.invoke({}).state.outs == ["loud=A", "shouter=B"]
    with pytest.raises(GraphConfigError, match="agents= takes a list of graphs"):
        Graph(Boss, agents="shouter")


def test_a_retried_node_reads_back_the_done_sub_agents_and_reruns_the_failed_one() -> None:
    from nodestep import RetryPolicy

    flaky = {"left": 1}

    @node
    async def sometimes(state: Job) -> dict:
        runs.append(f"try {state.text}")
        if state.text == "flaky" and flaky["left"]:
            flaky["left"] -= 1
            raise ConnectionError("the service blinked")
        return {"out": state.text.upper()}

    service = Graph(Job, name="service").flow(START >> sometimes, sometimes >> END)

    @node(retry=RetryPolicy(attempts=2, backoff=0))
    async def fan_out_again(state: Boss, ctx: NodeContext) -> dict:
        tasks = [AgentTask(service, input={"text": t}) for t in ("steady", "flaky")]
        return {"outs": [r.state.out for r in await ctx.gather(await ctx.spawn(tasks))]}

    result = boss(fan_out_again, InMemoryStateStore()).invoke({}, thread_id="t")
    assert result.state.outs == ["STEADY", "FLAKY"]
    assert sorted(runs) == ["try flaky", "try flaky", "try steady"]


def test_a_stream_with_subgraphs_shows_each_sub_agents_events_under_its_path() -> None:
    graph = boss(fan_out, InMemoryStateStore())
    seen: list[tuple[str | None, str | None, object]] = []
    for event in graph.stream(
        {"texts": ["a", "bb"]}, thread_id="s", stream_mode="updates", subgraphs=True
    ):
        if event.mode == "updates":
            seen.append((event.path, event.node, event.data))
    children = sorted(item for item in seen if item[0] is not None)
    assert children == [
        ("fan_out/shouter#0", "shout", {"out": "A"}),
        ("fan_out/shouter#1", "shout", {"out": "BB"}),
    ]
    assert seen[-1] == (None, "fan_out", {"outs": ["A", "BB"]})  # the parent's, after theirs
    # without subgraphs=True the stream shows the parent's own events only
    plain = [e.path for e in graph.stream({"texts": ["c"]}, thread_id="p", stream_mode="updates")]
    assert plain and set(plain) == {None}
