"""Every public object prints short: no 4,000-character line, no ``<... object at 0x...>``.

The test builds an instance of every public class of every face (from real runs where
that is how users get one: results, histories, snapshots, stores, an agent's step),
with big values inside (a 10,000-item list, a 5,000-character message), and checks
each ``repr``. A class it cannot build is listed with the reason.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

import nodestep
from nodestep import (
    END,
    START,
    AgentResult,
    AgentTask,
    BaseState,
    CachePolicy,
    CircuitBreaker,
    Command,
    Condition,
    Credentials,
    CredentialsProvider,
    Graph,
    InMemoryStateStore,
    Join,
    Replace,
    Resume,
    RetryPolicy,
    Send,
    add,
    interrupt,
    node,
)
from nodestep.agents import (
    Agent,
    AgentHandle,
    AgentStep,
    AgentToken,
    AgentToolCall,
    AgentToolResult,
    AnthropicChatModel,
    AssistantMessage,
    FileMap,
    FolderWorkspace,
    MCPClient,
    MessageChunk,
    MessageList,
    MessagesState,
    ModelMemory,
    NodeState,
    OpenAIChatModel,
    RemoveMessage,
    ScriptedModel,
    ScriptedReply,
    SystemMessage,
    TokenUsage,
    ToolCall,
    ToolCallChunk,
    ToolContext,
    ToolMessage,
    UserMessage,
    Workspace,
    WorkspaceState,
    create_react_agent,
    openapi_tools,
    tool,
)
from nodestep.history import FieldChange
from nodestep.memory import (
    FilesystemMemoryStore,
    InMemoryMemoryStore,
    PostgresMemoryStore,
    SQLiteMemoryStore,
)
from nodestep.store import (
    BranchRecord,
    FilesystemStateStore,
    Lease,
    PostgresStateStore,
    RecordPlace,
    SQLiteStateStore,
    ThreadInfo,
    ThreadPage,
)
from nodestep.testing import (
    Divergence,
    FakeEmbeddings,
    FakeTime,
    MemoryStoreConformance,
    StateStoreConformance,
    replay_sync,
    sequential_ids,
    ticking_clock,
)
from nodestep.tracing import UsageTotals

FACES = ["nodestep", "nodestep.agents", "nodestep.store", "nodestep.state", "nodestep.testing"]
FACES += ["nodestep.workers", "nodestep.memory", "nodestep.history", "nodestep.tracing"]
FACES += ["nodestep.middleware"]

# Classes no instance of which is built here, and why.
NOT_BUILT = {
    "RunOptions": "a TypedDict: its instances are plain dicts",
    "StateStore": "abstract; every built-in store is built",
    "ChatModel": "a protocol; ScriptedModel and OpenAIChatModel are built",
    "AppendPipe": "a protocol of the stores' appends",
    "NodeDeclaration": "made by the YAML loader for a node type's build function only",
    "NodeContext": "made by the engine for a running node; checked from inside one",
    "MCPTool": "made by MCPClient.tools() from a running MCP server (tests/agents/test_mcp.py)",
    "RunTicket": "needs a claimed job of a PostgreSQL run queue (tests/workers)",
    "MemoryStore": "abstract; every built-in memory store is built",
    "Embeddings": "a protocol; FakeEmbeddings is built",
}

BIG = ["vote"] * 10_000
LONG = "word " * 1_000


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


@node
def ask(state: Poll) -> dict[str, Any]:
    answer = interrupt({"question": "Go on?", "votes": state.votes}, id="go")
    return {"note": str(answer)}


def _classes() -> Iterator[tuple[str, type]]:
    for face in FACES:
        module = importlib.import_module(face)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and obj.__module__ == face:
                yield f"{face}.{name}", obj


def _run_objects(tmp_path: Path) -> list[Any]:
    store = InMemoryStateStore()
    graph = Graph(Poll, name="poll", state_store=store, id_factory=sequential_ids())
    graph = graph.flow(START >> ask, ask >> END)
    paused = graph.invoke({"votes": BIG, "note": LONG}, thread_id="t")
    done = graph.invoke(None, thread_id="t", resume=Resume("yes"))
    history = graph.state_history_sync("t")
    branch = graph.fork_sync("t", from_=history[2].event.id, name="again")
    stream = graph.stream(
        None, thread_id="t", stream_mode="values", branch_id="again", resume=Resume("no")
    )
    events = list(stream)
    events += list(graph.stream({"votes": BIG}, thread_id="u", stream_mode="updates"))
    ctx_seen: list[Any] = []

    @node
    def look(state: Poll, ctx: nodestep.NodeContext) -> None:
        ctx_seen.append(ctx)

    Graph(Poll).flow(START >> look, look >> END).invoke({})
    return [
        graph,
        paused,
        done,
        paused.interrupt,
        history,
        history.page(2, size=2),
        history[1],
        history[1].event,
        history[1].snapshot,
        graph.history_sync("t"),
        branch,
        graph.provenance_sync("t", "votes"),
        *graph.provenance_sync("t", "votes").writes,
        graph.diff_sync("t", "main", "again"),
        graph.usage_sync("t"),
        replay_sync(graph, store, "t"),
        *events,
        *(e.data for e in events if e.mode in ("final", "interrupt")),
        store,
        ctx_seen[0],
        ToolContext(ctx_seen[0], Poll(votes=BIG, note=LONG), "call-1", "echo"),
        ask,
        Poll(votes=BIG, note=LONG),
    ]


def _agent_objects(tmp_path: Path) -> list[Any]:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "chat.yaml").write_text("kind: LLMNode\nname: chat\nprompts:\n  system:\n    en: Hi\n")
    agent = Agent(specs, start_node="chat", llm=ScriptedModel([LONG]))
    step = agent.step_sync(LONG)
    pets = {
        "openapi": "3.1.0",
        "info": {"title": "Pets", "version": "1"},
        "paths": {"/pets": {"get": {"operationId": "listPets", "responses": {"200": {}}}}},
    }
    return [
        agent,
        step,
        AgentStep(LONG, "c-1", "failed", error=LONG, failed_nodes=("chat",)),
        AgentToken("chat", LONG, "chat-2"),
        AgentToolCall("chat", "f", {"x": LONG}, "chat-2-call-0"),
        AgentToolResult("f", "f", "chat-2-call-0", LONG, "ok"),
        agent.node_state_sync("chat"),
        NodeState("chat", "LLMNode", messages=tuple(UserMessage(content=LONG) for _ in range(50))),
        UserMessage(content=LONG),
        SystemMessage(content=LONG),
        AssistantMessage(content=LONG, tool_calls=(ToolCall(name="f", args={"x": LONG}),)),
        ToolCall(name="f", args={"x": LONG}),
        ToolMessage(content=LONG, tool_call_id="1"),
        RemoveMessage(id="m1"),
        MessageChunk(message_id="m", content=LONG),
        ToolCallChunk(args=LONG),
        MessageList([UserMessage(content=LONG)] * 100),
        MessagesState(messages=[UserMessage(content=LONG)] * 100),
        ModelMemory(messages=[UserMessage(content=LONG)] * 100),
        AssistantMessage(
            content=LONG, usage=TokenUsage(input_tokens=7, output_tokens=3, total_tokens=10)
        ),
        TokenUsage(input_tokens=7, output_tokens=3, total_tokens=10),
        AnthropicChatModel("claude-test", api_key="sk-ant-secret", base_url="http://127.0.0.1:9"),
        MCPClient(command=["python", "server.py", LONG]),
        OpenAIChatModel("gpt-test", api_key="sk-secret-key", base_url="http://127.0.0.1:9"),
        ScriptedModel([LONG] * 100),
        ScriptedReply(LONG),
        tool(_echo, name="echo", description=LONG),
        *openapi_tools(pets, base_url="http://127.0.0.1:9"),
        FileMap({f"notes/{i}.md": LONG for i in range(100)}),
        Workspace({f"notes/{i}.md": LONG for i in range(100)}),
        FolderWorkspace(tmp_path),
        WorkspaceState(workspace=FileMap({f"notes/{i}.md": LONG for i in range(100)})),
    ]


def _echo(text: str) -> str:
    return text


def _other_objects(tmp_path: Path) -> list[Any]:
    from nodestep.workers import RunOutcome, RunQueue

    return [
        CachePolicy(ttl=5),
        CircuitBreaker(),
        Command(update={"votes": BIG}, goto=END),
        Condition("len(votes) > 3"),
        Credentials("pets", "sk-secret"),
        CredentialsProvider({"pets": "sk-secret"}),
        Join("d", ("b", "c")),
        Replace(BIG),
        Resume(BIG),
        RetryPolicy(),
        Send("ask", {"votes": BIG}),
        nodestep.NodeType(lambda d: None, keys=("x",)),
        BranchRecord("b", "t", "main", "e-1", 3, 1_700_000_000.0),
        FilesystemStateStore(tmp_path / "h.jsonl"),
        SQLiteStateStore(tmp_path / "h.db"),
        PostgresStateStore("postgresql://u:pw-secret@127.0.0.1:9/app"),
        Lease("l", "t", "main", "me", 1.0, 30.0),
        RecordPlace("h.jsonl", 3, 120),
        ThreadInfo("t", "idle", 1.0, 2.0, 5),
        ThreadPage([ThreadInfo(f"t{i}", "idle", 1.0, 2.0, 5) for i in range(1000)], None),
        FakeTime(),
        StateStoreConformance(),
        RunQueue("postgresql://u:pw-secret@127.0.0.1:9/app"),
        RunOutcome("completed", _snapshot(), "r"),
        ticking_clock,
        Divergence(3, "e-3", 3, "main", "superstep_completed", "ask", "votes", BIG, LONG, LONG),
        FieldChange("votes", "appended", BIG, [*BIG, "x"], appended=("x",)),
        UsageTotals(calls=3, input_tokens=10, output_tokens=5, total_tokens=15, cost=0.25),
        AgentTask("researcher", input={"votes": BIG}),
        AgentResult("researcher", 0, "t:dispatch@1.0/researcher#0", "completed", Poll(votes=BIG)),
        AgentHandle("researcher", 0, "t:dispatch@1.0/researcher#0", None),
        *_memory_objects(tmp_path),
        *_middleware_objects(tmp_path),
    ]


def _middleware_objects(tmp_path: Path) -> list[Any]:
    from nodestep import middleware as mw
    from nodestep.agents import HumanApproval, ModelRequest

    seen: list[Any] = []

    class Keep(mw.Middleware):
        def before_graph(self, ctx: mw.GraphMiddlewareContext) -> None:
            seen.append(ctx)

        def after_node(self, ctx: mw.NodeMiddlewareContext) -> None:
            seen.append(ctx)

        def on_run_end(self, ctx: mw.GraphMiddlewareContext, outcome: mw.RunOutcome) -> None:
            seen.append(outcome)

        def before_model(self, ctx: mw.ModelMiddlewareContext) -> None:
            seen.append(ctx)
            seen.append(ctx.request)

        def before_tool(self, ctx: mw.ToolMiddlewareContext) -> None:
            seen.append(ctx)

    script = [ScriptedReply(tool_calls=[("echo", {"text": LONG})]), LONG]
    agent = create_react_agent(
        ScriptedModel(script), [tool(_echo, name="echo", description="Echo.")], middleware=[Keep()]
    )
    agent.invoke({"messages": [UserMessage(content=LONG)] * 100})
    skills = tmp_path / "skills"
    (skills / "s").mkdir(parents=True)
    (skills / "s" / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody")
    return [
        *seen,
        Keep(),
        mw.Replacement(BIG),
        mw.MiddlewareError(LONG[:100], "Keep", "before_node"),
        HumanApproval(["echo"]),
        ModelRequest([UserMessage(content=LONG)] * 100, [], ScriptedModel([])),
        mw.ToolCallLimit(run_limit=3),
        mw.ModelFallback([ScriptedModel([])]),
        mw.RedactPII(),
        mw.TrimMessages(5),
        mw.SummarizeMessages(ScriptedModel([])),
        mw.TodoList(),
        mw.Todo(content=LONG),
        mw.Skills(skills),
    ]


def _memory_objects(tmp_path: Path) -> list[Any]:
    memory = InMemoryMemoryStore(embeddings=FakeEmbeddings(dims=8))
    memory.put_sync(("users", "u-1"), "notes", {"text": LONG, "votes": BIG})
    item = memory.get_sync(("users", "u-1"), "notes")
    found = memory.search_sync(("users",), query="word")
    return [
        memory,
        item,
        *found,
        FakeEmbeddings(),
        MemoryStoreConformance(),
        FilesystemMemoryStore(tmp_path / "memory.jsonl"),
        SQLiteMemoryStore(tmp_path / "memory.db"),
        PostgresMemoryStore("postgresql://u:pw-secret@127.0.0.1:9/app"),
    ]


def _snapshot() -> Any:
    graph = Graph(Poll, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    graph.invoke({"votes": BIG}, thread_id="s")
    return graph.get_state_sync("s")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    tmp = tmp_path_factory.mktemp("reprs")
    return _run_objects(tmp) + _agent_objects(tmp) + _other_objects(tmp)


def _long_lines(text: str) -> list[int]:
    return [len(line) for line in text.splitlines() if len(line) > 300]


@pytest.mark.slow
def test_every_public_object_has_a_short_repr_that_names_it(built: list[Any]) -> None:
    bad = {}
    for obj in built:
        text = repr(obj)
        if _long_lines(text) or len(text) > 1_000 or " object at 0x" in text:
            bad[type(obj).__name__] = f"{len(text)}: {text[:150]}"
        assert "secret" not in text, text
    assert bad == {}, "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.slow
def test_every_public_class_is_built_or_says_why_not(built: list[Any]) -> None:
    exceptions = [n for n, c in _classes() if issubclass(c, BaseException)]
    missing = [
        name
        for name, cls in _classes()
        if name.rpartition(".")[2] not in NOT_BUILT
        and not issubclass(cls, BaseException)
        and not any(isinstance(obj, cls) for obj in built)
    ]
    assert missing == []
    assert len(exceptions) > 10  # errors print as Python prints exceptions: their message


def test_a_history_of_ten_thousand_steps_prints_as_one_short_line() -> None:
    graph = Graph(Poll, state_store=InMemoryStateStore()).flow(START >> ask, ask >> END)
    history = nodestep.StateHistory("t", "main", tuple(range(10_000)))  # type: ignore[arg-type]
    assert repr(history) == "StateHistory(thread_id='t', branch_id='main', 10,000 steps)"
    assert repr(graph) == "Graph(Poll, name='graph')"
