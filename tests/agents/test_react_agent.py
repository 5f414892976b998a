"""The ReAct agent, the model node and the tool node, run as graphs."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    InMemoryStateStore,
    MessagesState,
    ModelError,
    Resume,
    RunLimitExceededError,
    ScriptedModel,
    ScriptedReply,
    SQLiteStateStore,
    create_react_agent,
    interrupt,
    model_node,
    tool,
)
from nodestep.agents import (
    AnyMessage,
    AssistantMessage,
    MessageChunk,
    TokenUsage,
    ToolCallChunk,
    ToolMessage,
    WorkspaceState,
    tool_node,
    workspace_tools,
)

pytestmark = pytest.mark.anyio


@tool
def specs(topic: str) -> str:
    """Look up the specifications."""
    return {"rated_capacity": "720 Watts"}.get(topic, "no match")


@tool
def broken(topic: str) -> str:
    """Always fails."""
    raise ConnectionError(f"the {topic} service is down")


@tool(approve=True)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} EUR on {order}"


def _agent(script: list, tools: list | None = None, **options) -> Graph[MessagesState]:
    store = InMemoryStateStore()
    model = ScriptedModel(script)
    return create_react_agent(model, tools or [specs], state_store=store, **options)


async def test_the_agent_calls_tools_until_the_model_answers():
    graph = _agent(
        [
            ScriptedReply(tool_calls=[("specs", {"topic": "rated_capacity"})]),
            ScriptedReply("720 W.", expect="720 Watts"),
        ]
    )
    result = await graph.ainvoke({"messages": "Max load?"}, thread_id="t")
    assert [(m.role, m.content) for m in result.state.messages] == [
        ("user", "Max load?"),
        ("assistant", ""),
        ("tool", "720 Watts"),
        ("assistant", "720 W."),
    ]
    tool_message = result.state.messages[2]
    assert tool_message.tool_call_id == "call-1-1"
    assert [m.id for m in result.state.messages] == ["msg-1", "agent-2", "tools-3", "agent-4"]


async def test_the_system_prompt_is_sent_but_never_stored():
    model = ScriptedModel(["hello"])
    graph = create_react_agent(model, [specs], system="Be brief.")
    result = await graph.ainvoke({"messages": "hi"})
    assert [m.role for m in model.calls[0]] == ["system", "user"]
    assert [m.role for m in result.state.messages] == ["user", "assistant"]


async def test_several_calls_run_concurrently_and_answer_in_call_order():
    started: list[str] = []
    both = anyio.Event()

    @tool
    async def slow(name: str) -> str:
        """Wait for the other call."""
        started.append(name)
        if len(started) == 2:
            both.set()
        with anyio.fail_after(5):
            await both.wait()  # only returns when both calls run at the same time
        return f"done {name}"

    graph = _agent(
        [ScriptedReply(tool_calls=[("slow", {"name": "a"}), ("slow", {"name": "b"})]), "ok"],
        [slow],
    )
    result = await graph.ainvoke({"messages": "go"}, thread_id="t")
    assert [m.content for m in result.state.messages if isinstance(m, ToolMessage)] == [
        "done a",
        "done b",
    ]


async def test_tool_errors_go_back_to_the_model_as_error_messages():
    graph = _agent(
        [
            ScriptedReply(
                tool_calls=[("broken", {"topic": "x"}), ("specs", {}), ("nope", {})],
            ),
            ScriptedReply("sorry", expect="there is no tool 'nope'"),
        ],
        [specs, broken],
    )
    result = await graph.ainvoke({"messages": "go"}, thread_id="t")
    errors = [m for m in result.state.messages if isinstance(m, ToolMessage)]
    assert [m.status for m in errors] == ["error", "error", "error"]
    assert errors[0].content == "Error: broken raised ConnectionError: the x service is down"
    assert "arguments of specs are not valid: topic: Field required" in errors[1].content
    assert "the tools are broken, specs" in errors[2].content


async def test_a_custom_handler_writes_the_error_text():
    graph = _agent(
        [ScriptedReply(tool_calls=[("broken", {"topic": "x"})]), "ok"],
        [broken],
        handle_errors=lambda error: f"try later ({type(error).__name__})",
    )
    result = await graph.ainvoke({"messages": "go"}, thread_id="t")
    assert result.state.messages[2].content == "try later (ConnectionError)"


async def test_handle_errors_false_fails_the_run_with_the_tools_error():
    graph = _agent(
        [ScriptedReply(tool_calls=[("broken", {"topic": "x"})])], [broken], handle_errors=False
    )
    with pytest.raises(ConnectionError, match="the x service is down"):
        await graph.ainvoke({"messages": "go"}, thread_id="t")


class Widget:
    """Not JSON data."""


@tool
def make_widget(kind: str) -> object:
    """Make a widget."""
    return Widget() if kind == "bare" else {"widget": Widget()}


@tool
def misconfigured(topic: str) -> str:
    """A tool whose setup is wrong."""
    raise GraphConfigError("the tool needs base_url=; pass it when the tool is made")


async def test_a_result_without_a_json_form_is_an_error_message_naming_its_type():
    graph = _agent(
        [
            ScriptedReply(
                tool_calls=[("make_widget", {"kind": "bare"}), ("make_widget", {"kind": "in"})]
            ),
            "ok",
        ],
        [make_widget],
    )
    result = await graph.ainvoke({"messages": "go"}, thread_id="t")
    bare, held = result.state.messages[2:4]
    assert bare.status == held.status == "error"
    assert bare.content == (
        "Error: Tool 'make_widget' returned a Widget, which has no JSON form, so it cannot "
        "be sent to the model. Return a str, a pydantic model or JSON data (dicts, lists, "
        "strings, numbers) from the tool."
    )
    assert held.content.startswith("Error: Tool 'make_widget' returned a dict holding a Widget")
    strict = _agent(
        [ScriptedReply(tool_calls=[("make_widget", {"kind": "bare"})])],
        [make_widget],
        handle_errors=False,
    )
    with pytest.raises(GraphExecutionError, match="returned a Widget, which has no JSON form"):
        await strict.ainvoke({"messages": "go"}, thread_id="t")


class Reading(BaseModel):
    value: float


@tool
def sensor(kind: str) -> object:
    """Read a sensor."""
    found = {
        "dict": {"name": "boiler", "temperature": 81.5, "pressure": [1.0, float("inf")]},
        "bare": float("nan"),
        "model": {"readings": [Reading(value=-float("inf"))]},
        "null": {"temperature": None},
    }
    return found[kind]


async def test_a_result_holding_nan_or_infinity_is_a_failed_call_naming_the_place():
    kinds = ["dict", "bare", "model", "null"]
    graph = _agent(
        [ScriptedReply(tool_calls=[("sensor", {"kind": k}) for k in kinds]), "ok"], [sensor]
    )
    result = await graph.ainvoke({"messages": "go"}, thread_id="t")
    in_dict, bare, in_model, null = result.state.messages[2:6]
    assert in_dict.status == bare.status == in_model.status == "error"
    assert in_dict.content == (
        "Error: Tool 'sensor' returned a dict in which result['pressure'][1] is the float "
        "inf, which has no JSON form (JSON has no nan or infinity), so it cannot be sent to "
        "the model. Return finite numbers from the tool: None, or a string such as 'nan', "
        "where there is none."
    )
    assert bare.content.startswith("Error: Tool 'sensor' returned the float nan, which has")
    assert "result['readings'][0]['value'] is the float -inf" in in_model.content
    assert (null.status, null.content) == ("ok", '{"temperature":null}')


async def test_a_handler_that_returns_no_str_fails_the_run_naming_the_tool():
    def explain(error: Exception) -> dict:
        return {"error": str(error)}

    graph = _agent(
        [ScriptedReply(tool_calls=[("broken", {"topic": "x"})])], [broken], handle_errors=explain
    )
    with pytest.raises(GraphConfigError) as caught:
        await graph.ainvoke({"messages": "go"}, thread_id="t")
    assert str(caught.value) == (
        "The handle_errors function 'explain' returned a dict for the failed call of tool "
        "'broken'; it must return the text of the tool message, a str."
    )
    assert isinstance(caught.value.__cause__, ConnectionError)


@pytest.mark.parametrize("choice", ["ignore", None, 0, "raise"])
def test_handle_errors_takes_only_a_bool_or_a_function(choice):
    for make in (
        lambda: tool_node([specs], handle_errors=choice),
        lambda: create_react_agent(ScriptedModel(["x"]), [specs], handle_errors=choice),
    ):
        with pytest.raises(GraphConfigError) as caught:
            make()
        assert str(caught.value) == (
            f"handle_errors={choice!r} is not a choice: it takes True (a failed call goes "
            f"back to the model as an error tool message), False (it fails the run) or a "
            f"function that makes the message's text from the exception."
        )


@pytest.mark.parametrize("calls", [1, 2], ids=["alone", "concurrent"])
async def test_a_configuration_error_in_a_tool_fails_the_run(calls):
    # handle_errors=True sends the model what it can fix; a setup error it cannot.
    graph = _agent(
        [ScriptedReply(tool_calls=[("misconfigured", {"topic": "x"})] * calls), "ok"],
        [misconfigured],
    )
    with pytest.raises(GraphConfigError, match="the tool needs base_url="):
        await graph.ainvoke({"messages": "go"}, thread_id="t")


async def test_concurrent_failures_are_raised_in_a_group_that_names_each_tool():
    graph = _agent(
        [
            ScriptedReply(
                tool_calls=[
                    ("broken", {"topic": "a"}),
                    ("specs", {"topic": "x"}),
                    ("make_widget", {"kind": "bare"}),
                ]
            )
        ],
        [specs, broken, make_widget],
        handle_errors=False,
    )
    with pytest.raises(ExceptionGroup) as caught:
        await graph.ainvoke({"messages": "go"}, thread_id="t")
    group = caught.value
    assert group.message == (
        "2 of 3 tool calls failed: 'broken' (call 'call-1-1'), 'make_widget' (call "
        "'call-1-3'). With handle_errors=False a failed call fails the run"
    )
    first, second = group.exceptions
    assert isinstance(first, ConnectionError) and isinstance(second, GraphExecutionError)
    assert first.__notes__ == ["raised by the call 'call-1-1' of tool 'broken'"]


async def test_max_steps_bounds_the_rounds_of_tool_calls():
    looping = [ScriptedReply(tool_calls=[("specs", {"topic": "x"})])] * 10
    graph = _agent(looping, max_steps=4)
    with pytest.raises(RunLimitExceededError):
        await graph.ainvoke({"messages": "go"}, thread_id="t")


def _approval_agent() -> Graph[MessagesState]:
    return _agent(
        [
            ScriptedReply(
                tool_calls=[("refund", {"order": "A1", "amount": 5}), ("specs", {"topic": "x"})]
            ),
            "done",
        ],
        [specs, refund],
    )


async def test_an_approval_tool_pauses_before_any_call_runs():
    graph = _approval_agent()
    paused = await graph.ainvoke({"messages": "refund A1"}, thread_id="t")
    assert paused.status == "interrupted"
    assert paused.interrupt.payload["tool_calls"] == [
        {"id": "call-1-1", "name": "refund", "args": {"order": "A1", "amount": 5}}
    ]
    assert not any(isinstance(m, ToolMessage) for m in paused.state.messages)


@pytest.mark.parametrize(
    ("answer", "content", "args"),
    [
        ("approve", "refunded 5 EUR on A1", {"order": "A1", "amount": 5}),
        ({"call-1-1": True}, "refunded 5 EUR on A1", {"order": "A1", "amount": 5}),
        (
            {"edit": {"order": "A1", "amount": 3}},
            "refunded 3 EUR on A1",
            {"order": "A1", "amount": 3},
        ),
        ({"reject": "too much"}, "The user rejected this call of refund: too much.", None),
        ("reject", "The user rejected this call of refund.", None),
    ],
)
async def test_resume_approves_edits_or_rejects_a_call(answer, content, args):
    graph = _approval_agent()
    await graph.ainvoke({"messages": "refund A1"}, thread_id="t")
    result = await graph.ainvoke(None, thread_id="t", resume=Resume(answer))
    messages = result.state.messages
    refund_message = next(m for m in messages if isinstance(m, ToolMessage) and m.name == "refund")
    assert refund_message.content.startswith(content)
    assert refund_message.status == ("error" if args is None else "ok")
    if args is not None:
        assert messages[1].tool_calls[0].args == args  # the stored call shows what ran
    assert messages[-1].content == "done"


async def test_an_answer_that_is_no_decision_pauses_again_saying_what_to_answer():
    graph = _approval_agent()
    await graph.ainvoke({"messages": "refund A1"}, thread_id="t")
    again = await graph.ainvoke(None, thread_id="t", resume=Resume("maybe"))
    assert again.status == "interrupted"
    assert again.interrupt.key == "tools:approve-2"
    assert "is 'maybe', which is not a decision" in again.interrupt.payload["error"]
    third = await graph.ainvoke(None, thread_id="t", resume=Resume({"other": "approve"}))
    assert "leave out ['call-1-1']" in third.interrupt.payload["error"]
    done = await graph.ainvoke(None, thread_id="t", resume=Resume("approve"))
    assert done.status == "completed"
    assert done.state.messages[2].content == "refunded 5 EUR on A1"


async def test_messages_mode_streams_tokens_naming_node_and_message():
    graph = _agent(["It is 720 W."])
    events = [
        e
        async for e in graph.astream(
            {"messages": "max?"}, thread_id="t", stream_mode=["messages", "updates"]
        )
    ]
    tokens = [e for e in events if e.mode == "messages"]
    assert [e.data.content for e in tokens] == ["It", " is", " 720", " W."]
    assert {(e.node, e.data.message_id) for e in tokens} == {("agent", "agent-2")}
    assert all(isinstance(e.data, MessageChunk) for e in tokens)
    updates = [e for e in events if e.mode == "updates"]
    usage = TokenUsage(input_tokens=1, output_tokens=4)
    reply = AssistantMessage(
        content="It is 720 W.", id="agent-2", model="scripted", usage=usage, finish_reason="stop"
    )
    assert updates[-1].data == {"messages": [reply]}
    stored = (await graph.get_state("t")).value.messages
    assert [m.id for m in stored] == ["msg-1", "agent-2"]  # the reply, once, whole


async def test_without_streaming_the_model_completes_and_stores_the_same_message():
    streamed = await _agent(["Same text."]).ainvoke({"messages": "q"}, thread_id="t")
    whole = await _agent(["Same text."], stream=False).ainvoke({"messages": "q"}, thread_id="t")
    assert list(streamed.state.messages) == list(whole.state.messages)


async def test_the_agent_is_an_ordinary_graph_that_forks_and_travels_back():
    graph = _agent(["first answer", "second answer"])
    first = await graph.ainvoke({"messages": "one"}, thread_id="t")
    done = await graph.ainvoke({"messages": "two"}, thread_id="t")
    assert [m.content for m in done.state.messages] == [
        "one",
        "first answer",
        "two",
        "second answer",
    ]

    back = await graph.get_state("t", first.checkpoint_id)
    assert [m.content for m in back.value.messages] == ["one", "first answer"]

    branch = await graph.fork("t", from_=first.checkpoint_id, name="alt")
    other = await graph.ainvoke({"messages": "other"}, thread_id="t", branch_id=branch.id)
    assert [m.content for m in other.state.messages] == [
        "one",
        "first answer",
        "other",
        "second answer",
    ]
    assert [m.id for m in other.state.messages] == ["msg-1", "agent-2", "msg-3", "agent-4"]
    main = await graph.get_state("t")
    assert [m.content for m in main.value.messages][2] == "two"


class NoMessages(BaseState):
    text: str = ""


class PlainConversation(BaseState):
    messages: list[AnyMessage] = Field(default_factory=list)


def test_nodes_need_a_messages_field_and_say_how_to_add_it_when_the_flow_is_declared():
    agent = model_node(ScriptedModel(["x"]))
    with pytest.raises(GraphConfigError, match="but NoMessages has none") as caught:
        Graph(NoMessages).flow(START >> agent, agent >> END)
    assert "messages: Messages = Field(default_factory=MessageList)" in str(caught.value)


def test_model_and_tool_nodes_refuse_a_messages_field_without_add_messages():
    # A plain list field would take each reply as the whole conversation, silently.
    agent, tools = model_node(ScriptedModel(["x"])), tool_node([specs])
    with pytest.raises(GraphConfigError) as caught:
        Graph(PlainConversation).flow(START >> agent, agent >> tools, tools >> END)
    assert len(caught.value.problems) == 2
    for name, problem in zip(["agent", "tools"], caught.value.problems, strict=True):
        assert problem.startswith(
            f"Node '{name}' adds its messages to the field 'messages' of PlainConversation, "
            f"which has no add_messages reducer, so each write would replace the whole "
            f"conversation."
        )
        assert "messages: Messages = Field(default_factory=MessageList)" in problem
    private = model_node(ScriptedModel(["x"]), conversation="private")
    with pytest.raises(GraphConfigError, match="no add_messages reducer"):
        Graph(PlainConversation).flow(START >> private, private >> END)


def test_bad_agent_settings_are_refused_when_built():
    with pytest.raises(GraphConfigError, match="takes a chat model"):
        model_node(object())  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match="needs at least one tool"):
        tool_node([])
    with pytest.raises(GraphConfigError, match="Two tools are named 'specs'"):
        tool_node([specs, specs])
    with pytest.raises(GraphConfigError, match="derived from MessagesState"):
        create_react_agent(ScriptedModel(["x"]), [specs], state=NoMessages)  # type: ignore[type-var]


async def test_a_model_failure_fails_the_run_as_a_model_error():
    graph = _agent(["only one"])
    await graph.ainvoke({"messages": "one"}, thread_id="t")
    with pytest.raises(ModelError, match="asked for reply 2"):
        await graph.ainvoke({"messages": "two"}, thread_id="t")


class _Broken:
    """A chat model whose replies cannot be used."""

    name = "broken-model"

    async def complete(self, messages, tools):
        return "just text"

    async def stream(self, messages, tools):
        yield MessageChunk(tool_call_chunks=(ToolCallChunk(index=0, name="specs", args="{oops"),))


async def test_a_model_reply_that_cannot_be_used_is_a_model_error_naming_the_model():
    for stream, says in (
        (False, "returned a str from complete"),
        (True, "not valid JSON|JSON object"),
    ):
        chat = model_node(_Broken(), stream=stream)
        graph = Graph(MessagesState).flow(START >> chat, chat >> END)
        with pytest.raises(ModelError, match=says) as caught:
            await graph.ainvoke({"messages": "hi"})
        assert caught.value.model == "broken-model"


async def test_several_waiting_calls_are_answered_by_id():
    graph = _agent(
        [
            ScriptedReply(
                tool_calls=[
                    ("refund", {"order": "A1", "amount": 5}),
                    ("refund", {"order": "B2", "amount": 7}),
                ]
            ),
            "done",
        ],
        [refund],
    )
    paused = await graph.ainvoke({"messages": "refund both"}, thread_id="t")
    assert [c["id"] for c in paused.interrupt.payload["tool_calls"]] == ["call-1-1", "call-1-2"]
    again = await graph.ainvoke(None, thread_id="t", resume=Resume("approve"))
    assert "does not say which it is for" in again.interrupt.payload["error"]
    done = await graph.ainvoke(
        None, thread_id="t", resume=Resume({"call-1-1": "approve", "call-1-2": {"reject": "no"}})
    )
    contents = [m.content for m in done.state.messages if isinstance(m, ToolMessage)]
    assert contents == [
        "refunded 5 EUR on A1",
        "The user rejected this call of refund: no. Do not call it again as is.",
    ]


async def test_two_model_nodes_in_one_step_stream_tokens_each_naming_its_node_and_message():
    from nodestep import Command, node

    left = model_node(ScriptedModel(["left says hi"]), name="left")
    right = model_node(ScriptedModel(["right says yo"]), name="right")

    @node(goto=[left, right])
    def ask(state: MessagesState) -> Command:
        return Command(goto=[left, right])

    graph = Graph(MessagesState).flow(START >> ask, left >> END, right >> END)
    events = [e async for e in graph.astream({"messages": "hi"}, stream_mode="messages")]
    by_node: dict[str, list[str]] = {}
    for event in events[:-1]:
        by_node.setdefault(f"{event.node} {event.data.message_id}", []).append(event.data.content)
    assert {key: "".join(parts) for key, parts in by_node.items()} == {
        "left left-2": "left says hi",
        "right right-2": "right says yo",
    }
    stored = events[-1].data.state.messages
    assert sorted((m.id, m.content) for m in stored[1:]) == [
        ("left-2", "left says hi"),
        ("right-2", "right says yo"),
    ]


_rounds = st.lists(
    st.lists(st.sampled_from(["rated_capacity", "model", "colour"]), min_size=1, max_size=3),
    max_size=3,
)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(rounds=_rounds, answer=st.text(max_size=12))
def test_a_replayed_agent_thread_equals_the_live_one(rounds, answer):
    script = [
        ScriptedReply(tool_calls=[("specs", {"topic": topic}) for topic in topics])
        for topics in rounds
    ]
    store = InMemoryStateStore()
    live = create_react_agent(ScriptedModel([*script, answer]), [specs], state_store=store)
    result = live.invoke({"messages": "go"}, thread_id="t")
    assert len(result.state.messages) == 2 + sum(1 + len(topics) for topics in rounds)

    # A new graph on the same store has no cached position: it folds the stored records.
    replayed = create_react_agent(ScriptedModel([]), [specs], state_store=store)
    snapshot = anyio.run(replayed.get_state, "t")
    assert list(snapshot.value.messages) == list(result.state.messages)


# interrupt() inside tools: a reply with several calls pauses with each call's interrupts.

_ran: list[str] = []


@tool
def ask_human(question: str) -> str:
    """Ask a person."""
    answer = interrupt({"q": question}, id="human")
    _ran.append(f"ask {question} -> {answer}")
    return f"human said {answer}"


@tool
def note(text: str) -> str:
    """Take a note, once."""
    _ran.append(f"note {text}")
    return f"noted {text}"


def _pausing_agent(path, tools: list | None = None, **options) -> Graph:
    script = [
        ScriptedReply(
            tool_calls=[
                ("ask_human", {"question": "ship?"}),
                ("note", {"text": "a"}),
                ("ask_human", {"question": "bill?"}),
            ]
        ),
        "done",
    ]
    store = SQLiteStateStore(path)
    return create_react_agent(
        ScriptedModel(script), tools or [ask_human, note], state_store=store, **options
    )


async def test_tools_pausing_beside_other_calls_pause_with_each_calls_interrupt(tmp_path):
    _ran.clear()
    paused = await _pausing_agent(tmp_path / "a.db").ainvoke({"messages": "go"}, thread_id="t")
    assert paused.status == "interrupted"
    # Two calls ask with one id: each call's interrupts are keyed under the call's id.
    assert {key: i.payload for key, i in paused.interrupts.items()} == {
        "tools/call-1-1:human": {"q": "ship?"},
        "tools/call-1-3:human": {"q": "bill?"},
    }
    assert _ran == ["note a"]

    # Another graph on the stored thread: the finished call is not run again.
    answers = {"tools/call-1-1:human": "yes", "tools/call-1-3:human": "later"}
    resumed = _pausing_agent(tmp_path / "a.db")
    done = await resumed.ainvoke(None, thread_id="t", resume=Resume(answers=answers))
    assert done.status == "completed"
    assert [m.content for m in done.state.messages if isinstance(m, ToolMessage)] == [
        "human said yes",
        "noted a",
        "human said later",
    ]
    assert sorted(_ran) == ["ask bill? -> later", "ask ship? -> yes", "note a"]


async def test_a_lone_call_that_pauses_is_keyed_by_the_task_alone():
    graph = _agent(
        [ScriptedReply(tool_calls=[("ask_human", {"question": "ok?"})]), "done"], [ask_human]
    )
    paused = await graph.ainvoke({"messages": "go"}, thread_id="t")
    assert list(paused.interrupts) == ["tools:human"]
    done = await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert done.state.messages[2].content == "human said yes"


async def test_a_failed_call_beside_a_paused_one_fails_the_run():
    # As a failed task beside a paused one fails its superstep: the failure wins.
    calls = [("ask_human", {"question": "?"}), ("broken", {"topic": "x"})]
    graph = _agent([ScriptedReply(tool_calls=calls)], [ask_human, broken], handle_errors=False)
    with pytest.raises(ExceptionGroup, match="1 of 2 tool calls failed: 'broken'"):
        await graph.ainvoke({"messages": "go"}, thread_id="t")
    assert (await graph.get_state("t")).status == "failed"


async def test_a_workspace_call_beside_a_paused_one_keeps_its_files_without_running_again():
    _ran.clear()
    script = [
        ScriptedReply(
            tool_calls=[
                ("write_file", {"path": "plan.md", "content": "ship it"}),
                ("ask_human", {"question": "ship?"}),
            ]
        ),
        "done",
    ]
    graph = create_react_agent(
        ScriptedModel(script),
        [*workspace_tools(), ask_human],
        state=WorkspaceState,
        state_store=InMemoryStateStore(),
    )
    paused = await graph.ainvoke({"messages": "go"}, thread_id="t")
    assert paused.status == "interrupted" and dict(paused.state.workspace) == {}
    done = await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert dict(done.state.workspace) == {"plan.md": "ship it"}
    assert [m.status for m in done.state.messages[2:4]] == ["ok", "ok"]
