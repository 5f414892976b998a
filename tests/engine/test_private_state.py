"""Per-node private state: only its node reads and writes it; it follows history like the state."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    InvalidUpdateError,
    NodeContext,
    Resume,
    Send,
    StateStoreError,
    interrupt,
    node,
)
from nodestep.store import StateStore
from store_helpers import reopened

pytestmark = pytest.mark.anyio


class Chat(BaseState):
    message: str = ""
    reply: str = ""


class Memory(BaseModel):
    messages: list[str] = []


@node(private_state=Memory)
def chat(state: Chat, *, memory: Memory) -> dict[str, Any]:
    memory.messages.append(state.message)
    return {"reply": " | ".join(memory.messages)}


def chat_graph(store: StateStore | None) -> Graph[Chat]:
    return Graph(Chat, state_store=store).flow(START >> chat, chat >> END)


async def test_a_node_remembers_its_private_state_across_turns(store: StateStore) -> None:
    g = chat_graph(store)
    await g.ainvoke({"message": "My name is Ann."}, thread_id="t")
    result = await g.ainvoke({"message": "What is my name?"}, thread_id="t")
    assert result.state.reply == "My name is Ann. | What is my name?"
    assert await g.node_state("t", chat) == Memory(messages=["My name is Ann.", "What is my name?"])


async def test_it_is_not_part_of_the_shared_state(store: StateStore) -> None:
    g = chat_graph(store)
    await g.ainvoke({"message": "hi"}, thread_id="t")
    assert await g.load("t") == {"message": "hi", "reply": "hi"}
    assert "messages" not in (await g.get_state("t")).value.model_dump()


async def test_a_new_graph_on_the_same_store_restores_it(store: StateStore) -> None:
    await chat_graph(store).ainvoke({"message": "one"}, thread_id="t")
    again = chat_graph(reopened(store))
    assert (await again.ainvoke({"message": "two"}, thread_id="t")).state.reply == "one | two"


async def test_it_follows_load_at_fork_and_time_travel(store: StateStore) -> None:
    g = chat_graph(store)
    await g.ainvoke({"message": "one"}, thread_id="t")
    await g.ainvoke({"message": "two"}, thread_id="t")
    events = (await g.history("t")).events
    first = next(e for e in events if e.type == "run_completed")
    assert await g.node_state("t", "chat", at=first.id) == Memory(messages=["one"])
    branch = await g.fork("t", from_=first.id, name="retake")
    result = await g.ainvoke({"message": "again"}, thread_id="t", branch_id=branch.id)
    assert result.state.reply == "one | again"
    assert await g.node_state("t", chat) == Memory(messages=["one", "two"])
    assert await g.node_state("t", chat, branch_id="retake") == Memory(messages=["one", "again"])


async def test_it_is_restored_from_a_checkpoint_after_many_turns(store: StateStore) -> None:
    g = chat_graph(store)
    for n in range(30):  # three records a turn: past the checkpoint every 50 records
        await g.ainvoke({"message": str(n)}, thread_id="t")
    bodies = (await g.history("t")).events
    assert any(e.type == "checkpoint" and "node_states" in e.data for e in bodies[1:])
    fresh = chat_graph(reopened(store))
    assert (await fresh.node_state("t", chat)).messages == [str(n) for n in range(30)]


async def test_a_node_that_never_changed_it_reads_the_defaults() -> None:
    g = chat_graph(InMemoryStateStore())
    await g.update_state("t", {"message": "x"}, create=True)
    assert await g.node_state("t", chat) == Memory()


async def test_an_unchanged_private_state_is_not_stored() -> None:
    @node(private_state=Memory)
    def reader(state: Chat, *, memory: Memory) -> dict[str, Any]:
        return {"reply": str(len(memory.messages))}

    g = Graph(Chat, state_store=InMemoryStateStore()).flow(START >> reader, reader >> END)
    await g.ainvoke({}, thread_id="t")
    events = (await g.history("t")).events
    assert not any("private" in str(e.data) for e in events)


async def test_a_failed_or_paused_task_leaves_it_as_it_was() -> None:
    @node(private_state=Memory)
    def ask(state: Chat, ctx: NodeContext, *, memory: Memory) -> dict[str, Any]:
        memory.messages.append("asked")
        answer = interrupt("name?", id="name")
        if answer == "fail":
            raise ValueError("no")
        memory.messages.append(answer)
        return {}

    g = Graph(Chat, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    await g.ainvoke({}, thread_id="t")
    assert await g.node_state("t", ask) == Memory()
    with pytest.raises(ValueError, match="no"):
        await g.ainvoke(None, thread_id="t", resume=Resume("fail"))
    assert await g.node_state("t", ask) == Memory()


class Fan(BaseState):
    items: list[str] = Field(default_factory=list)


class Seen(BaseModel):
    count: int = 0


def fan_graph(change: str) -> tuple[Graph[Fan], Any]:
    @node(private_state=Seen)
    def work(state: Fan, ctx: NodeContext, *, seen: Seen) -> dict[str, Any]:
        assert seen.count == 0  # every task of the superstep reads the same copy
        if change in ("all", ctx.task_id):
            seen.count += 1
        return {}

    @node(goto=[work])
    def fan(state: Fan) -> Command:
        return Command(goto=[Send(work, {}), Send(work, {})])

    g = Graph(Fan, state_store=InMemoryStateStore()).flow(START >> fan, work >> END)
    return g, work


async def test_send_tasks_of_one_node_read_one_copy_and_one_of_them_may_change_it() -> None:
    g, work = fan_graph("work[1]")
    await g.ainvoke({}, thread_id="t")
    assert await g.node_state("t", work) == Seen(count=1)
    # Read back by a graph with no cached position: replayed from task_finished records.
    fresh = Graph(Fan, state_store=g.state_store).flow(START >> g.nodes["fan"], work >> END)
    assert await fresh.node_state("t", work) == Seen(count=1)


async def test_two_send_tasks_changing_it_in_one_superstep_are_refused() -> None:
    g, _ = fan_graph("all")
    with pytest.raises(InvalidUpdateError, match="Tasks 'work' and 'work\\[1\\]' of node 'work'"):
        await g.ainvoke({}, thread_id="t")
    assert (await g.get_state("t")).status == "blocked"


async def test_a_stored_copy_that_no_longer_fits_the_model_fails_the_task() -> None:
    g = chat_graph(InMemoryStateStore())
    await g.ainvoke({"message": "x"}, thread_id="t")

    class Strict(BaseModel):
        messages: list[int] = []

    @node(name="chat", private_state=Strict)
    def strict(state: Chat, *, memory: Strict) -> dict[str, Any]:
        return {}

    other = Graph(Chat, state_store=g.state_store).flow(START >> strict, strict >> END)
    with pytest.raises(StateStoreError, match="private state of node 'chat' does not fit"):
        await other.ainvoke({}, thread_id="t")


async def test_a_value_without_json_form_fails_the_task() -> None:
    class Loose(BaseModel, arbitrary_types_allowed=True):
        thing: Any = None

    @node(private_state=Loose)
    def keep(state: Chat, *, memory: Loose) -> dict[str, Any]:
        memory.thing = object()
        return {}

    g = Graph(Chat, state_store=InMemoryStateStore()).flow(START >> keep, keep >> END)
    with pytest.raises(StateStoreError, match="private state of node 'keep'"):
        await g.ainvoke({}, thread_id="t")


async def test_node_state_names_what_is_wrong() -> None:
    g = chat_graph(InMemoryStateStore())
    await g.ainvoke({}, thread_id="t")
    with pytest.raises(
        GraphConfigError, match=r"has no node 'nope'\. Nodes with private state: chat"
    ):
        await g.node_state("t", "nope")
    with pytest.raises(GraphConfigError, match=r"has no state store"):
        await chat_graph(None).node_state("t", chat)


def test_a_declared_private_state_needs_a_parameter_annotated_with_it() -> None:
    def forgot(state: Chat) -> dict[str, Any]:
        return {}

    with pytest.raises(GraphConfigError, match="no parameter is annotated Memory"):
        node(forgot, private_state=Memory)


def test_the_private_state_parameter_comes_after_the_state_and_context() -> None:
    def early(memory: Memory, state: Chat) -> dict[str, Any]:
        return {}

    with pytest.raises(GraphConfigError, match="before the state or the context"):
        node(early, private_state=Memory)


def test_private_state_takes_a_pydantic_model_class() -> None:
    def f(state: Chat, *, memory: dict) -> dict[str, Any]:  # type: ignore[type-arg]
        return {}

    with pytest.raises(GraphConfigError, match="private_state= takes a pydantic model class"):
        node(f, private_state=dict)  # type: ignore[arg-type]


def test_a_positional_private_parameter_after_the_context_works() -> None:
    @node(private_state=Memory)
    def talk(state: Chat, ctx: NodeContext, memory: Memory) -> dict[str, Any]:
        memory.messages.append(ctx.node)
        return {"reply": ",".join(memory.messages)}

    g = Graph(Chat).flow(START >> talk, talk >> END)
    assert g.invoke({}).state.reply == "talk"


class ChatV2(BaseState):
    message: str = ""
    reply: str = ""
    mood: str = "calm"


async def test_a_migrated_thread_keeps_the_private_state(store: StateStore) -> None:
    await chat_graph(store).ainvoke({"message": "one"}, thread_id="t")
    v2 = Graph(ChatV2, state_store=store).flow(START >> chat, chat >> END)
    await v2.migrate("t", lambda values: values, from_state=Chat)
    assert await v2.node_state("t", chat) == Memory(messages=["one"])
    assert (await v2.ainvoke({"message": "two"}, thread_id="t")).state.reply == "one | two"
