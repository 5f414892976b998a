"""The built-in middleware: limits, todo list, PII, trimming, summaries, skills, approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import GraphConfigError, InMemoryStateStore, Resume
from nodestep.agents import (
    AssistantMessage,
    ScriptedModel,
    ScriptedReply,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    create_react_agent,
    tool,
)
from nodestep.middleware import (
    HumanApproval,
    Middleware,
    RedactPII,
    Skills,
    SummarizeMessages,
    Todo,
    TodoList,
    ToolCallLimit,
    TrimMessages,
    todos_of,
)

pytestmark = pytest.mark.anyio


@tool
def look(q: str) -> str:
    """Look it up."""
    return f"found {q}"


@tool
def mail(to: str) -> str:
    """Send a mail."""
    return f"sent to {to}"


def _calls(*calls: tuple[str, dict[str, Any]]) -> ScriptedReply:
    return ScriptedReply(tool_calls=list(calls))


def _results(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.content, m.status) for m in messages if isinstance(m, ToolMessage)]


async def test_tool_call_limit_per_run_refuses_calls_over_it_and_starts_again_next_run() -> None:
    script = [
        _calls(("look", {"q": "a"}), ("look", {"q": "b"})),
        "first done",
        _calls(("look", {"q": "c"})),
        "second done",
    ]
    agent = create_react_agent(
        ScriptedModel(script),
        [look],
        middleware=[ToolCallLimit(run_limit=1)],
        state_store=InMemoryStateStore(),
    )
    first = await agent.ainvoke({"messages": ["go"]}, thread_id="t")
    assert [s for _, s in _results(first.state.messages)] == ["ok", "error"]
    assert "at most 1 calls per run" in _results(first.state.messages)[1][0]
    second = await agent.ainvoke({"messages": ["again"]}, thread_id="t")
    assert _results(second.state.messages)[-1] == ("found c", "ok")


async def test_tool_call_limit_per_thread_counts_every_run_of_the_thread() -> None:
    script = [_calls(("look", {"q": "a"})), "one", _calls(("look", {"q": "b"})), "two"]
    agent = create_react_agent(
        ScriptedModel(script),
        [look],
        middleware=[ToolCallLimit(thread_limit=1)],
        state_store=InMemoryStateStore(),
    )
    await agent.ainvoke({"messages": ["go"]}, thread_id="t")
    second = await agent.ainvoke({"messages": ["again"]}, thread_id="t")
    assert "per thread" in _results(second.state.messages)[-1][0]


async def test_tool_call_limit_of_one_tool_leaves_the_others() -> None:
    script = [_calls(("mail", {"to": "a"}), ("mail", {"to": "b"}), ("look", {"q": "x"})), "ok"]
    agent = create_react_agent(
        ScriptedModel(script), [look, mail], middleware=[ToolCallLimit(run_limit=1, tool="mail")]
    )
    messages = (await agent.ainvoke({"messages": ["go"]})).state.messages
    assert [s for _, s in _results(messages)] == ["ok", "error", "ok"]


@pytest.mark.parametrize(
    ("options", "message"),
    [({}, "needs run_limit="), ({"run_limit": -1}, "an int >= 0"), ({"thread_limit": "2"}, "'2'")],
)
def test_tool_call_limit_refuses_bad_limits(options: dict[str, Any], message: str) -> None:
    with pytest.raises(GraphConfigError, match=message):
        ToolCallLimit(**options)


async def test_todo_list_is_written_and_read_back_from_the_thread() -> None:
    todos = [{"content": "draft", "status": "completed"}, {"content": "send"}]
    script = [_calls(("write_todos", {"todos": todos})), _calls(("read_todos", {})), "done"]
    agent = create_react_agent(ScriptedModel(script), [look], middleware=[TodoList()])
    messages = (await agent.ainvoke({"messages": ["plan"]})).state.messages
    assert _results(messages)[0] == ("The todo list has 2 items, 1 completed.", "ok")
    assert '"content":"send","status":"pending"' in _results(messages)[1][0]
    assert todos_of(messages) == [Todo(content="draft", status="completed"), Todo(content="send")]


async def test_an_empty_todo_list_reads_as_empty_and_a_refused_write_does_not_count() -> None:
    script = [_calls(("read_todos", {})), "done"]
    agent = create_react_agent(ScriptedModel(script), [look], middleware=[TodoList()])
    messages = (await agent.ainvoke({"messages": ["plan"]})).state.messages
    assert _results(messages) == [("The todo list is empty.", "ok")]
    refused = [
        AssistantMessage(
            tool_calls=[ToolCall(id="c", name="write_todos", args={"todos": [{"content": "x"}]})]
        ),
        ToolMessage(content="limit", tool_call_id="c", status="error"),
    ]
    assert todos_of(refused) == []


async def test_read_todos_without_the_middleware_fails_saying_to_add_it() -> None:
    tools = TodoList().tools()
    script = [_calls(("read_todos", {})), "done"]
    agent = create_react_agent(ScriptedModel(script), tools, handle_errors=False)
    with pytest.raises(GraphConfigError, match=r"middleware=\[TodoList\(\)\]"):
        await agent.ainvoke({"messages": ["plan"]})


async def test_redact_pii_masks_the_request_and_the_stored_reply() -> None:
    model = ScriptedModel(["write to ann@example.org or call +44 20 7946 0958"])
    agent = create_react_agent(model, [look], middleware=[RedactPII()])
    said = "I am bob@example.com, card 4111 1111 1111 1111, order 1234 5678 9012 3456"
    result = await agent.ainvoke({"messages": [said]})
    sent = model.calls[0][-1].content
    assert sent == ("I am [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD], order 1234 5678 9012 3456")
    assert result.state.messages[0].content == said  # the input is stored as it was
    assert result.state.messages[-1].content == (
        "write to [REDACTED_EMAIL] or call [REDACTED_PHONE]"
    )


def test_redact_pii_refuses_unknown_kinds_and_doing_nothing() -> None:
    with pytest.raises(GraphConfigError, match="the kinds are email, credit_card"):
        RedactPII(["ssn"])
    with pytest.raises(GraphConfigError, match="masks nothing"):
        RedactPII(input=False, output=False)
    assert RedactPII(["ip"]).redact("from 10.0.0.1") == "from [REDACTED_IP]"


def test_redact_pii_takes_one_kind_as_a_str() -> None:
    only_email = RedactPII("email")
    assert only_email.kinds == ["email"]
    assert only_email.redact("ann@example.com at 10.0.0.1") == "[REDACTED_EMAIL] at 10.0.0.1"
    with pytest.raises(GraphConfigError, match=r"RedactPII got kinds \['mail'\]"):
        RedactPII("mail")


def _long_conversation() -> list[Any]:
    return [
        UserMessage(content="q1"),
        AssistantMessage(content="", tool_calls=[ToolCall(id="c1", name="look", args={"q": "x"})]),
        ToolMessage(content="r1", tool_call_id="c1", name="look"),
        AssistantMessage(content="a1"),
        UserMessage(content="q2"),
        AssistantMessage(
            content="",
            tool_calls=[
                ToolCall(id="c2", name="look", args={"q": "y"}),
                ToolCall(id="c3", name="look", args={"q": "z"}),
            ],
        ),
        ToolMessage(content="r2", tool_call_id="c2", name="look"),
        ToolMessage(content="r3", tool_call_id="c3", name="look"),
    ]


async def test_trim_messages_keeps_tool_results_with_their_call() -> None:
    model = ScriptedModel(["ok"] * 4)  # it picks a reply by the assistant messages it is sent
    agent = create_react_agent(model, [look], system="Be brief.", middleware=[TrimMessages(2)])
    await agent.ainvoke({"messages": _long_conversation()})
    sent = model.calls[0]
    assert isinstance(sent[0], SystemMessage)
    # keep=2 would start at a tool result: the cut moves to the call that made both.
    assert [getattr(m, "content", "") for m in sent[1:]] == ["", "r2", "r3"]
    with pytest.raises(GraphConfigError, match="an int >= 1"):
        TrimMessages(0)


async def test_summarize_messages_sends_a_summary_of_the_older_part() -> None:
    summarizer = ScriptedModel(["They asked q1 and got a1."], name="summarizer")
    model = ScriptedModel(["ok"] * 4)
    middleware = [SummarizeMessages(summarizer, max_messages=4, keep=3)]
    agent = create_react_agent(model, [look], middleware=middleware)
    result = await agent.ainvoke({"messages": _long_conversation()})
    sent = model.calls[0]
    assert sent[0].content == "Summary of the earlier conversation: They asked q1 and got a1."
    assert [getattr(m, "content", "") for m in sent[1:]] == ["", "r2", "r3"]
    assert len(result.state.messages) == 9  # the stored conversation stays whole
    assert "user: q1" in summarizer.calls[0][-1].content
    with pytest.raises(GraphConfigError, match="must be less than max_messages"):
        SummarizeMessages(summarizer, max_messages=4, keep=4)


def _skill(root: Path, folder: str, text: str) -> None:
    (root / folder).mkdir()
    (root / folder / "SKILL.md").write_text(text, encoding="utf-8")


async def test_skills_are_listed_to_the_model_and_loaded_on_demand(tmp_path: Path) -> None:
    _skill(
        tmp_path, "haiku", "---\nname: haiku\ndescription: Write a haiku.\n---\n5-7-5 syllables."
    )
    script = [_calls(("load_skill", {"name": "haiku"}), ("load_skill", {"name": "sonnet"})), "ok"]
    model = ScriptedModel(script)
    agent = create_react_agent(model, [look], middleware=[Skills(tmp_path)])
    messages = (await agent.ainvoke({"messages": ["a poem"]})).state.messages
    assert "- haiku: Write a haiku." in model.calls[0][0].content
    assert _results(messages)[0] == ("5-7-5 syllables.", "ok")
    assert _results(messages)[1] == ("There is no skill 'sonnet'; the skills are haiku.", "error")


def test_skills_refuse_a_missing_folder_a_bad_front_matter_and_a_name_twice(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match="no such folder"):
        Skills(tmp_path / "nope")
    _skill(tmp_path, "a", "---\nname: a\n---\nbody")
    with pytest.raises(GraphConfigError, match="has no description"):
        Skills(tmp_path)
    (tmp_path / "a" / "SKILL.md").write_text("---\nname: a\ndescription: d\n---\n")
    _skill(tmp_path, "b", "---\nname: a\ndescription: d\n---\n")
    with pytest.raises(GraphConfigError, match="Two skills are named 'a'"):
        Skills(tmp_path)


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        ("approve", ("sent to ann", "ok")),
        ({"edit": {"to": "bob"}}, ("sent to bob", "ok")),
        (
            {"reject": "no"},
            ("The user rejected this call of mail: no. Do not call it again as is.", "error"),
        ),
    ],
)
async def test_human_approval_pauses_before_the_named_tools(answer: Any, result: Any) -> None:
    script = [_calls(("mail", {"to": "ann"}), ("look", {"q": "x"})), "done"]
    agent = create_react_agent(
        ScriptedModel(script),
        [look, mail],
        middleware=[HumanApproval(["mail"])],
        state_store=InMemoryStateStore(),
    )
    paused = await agent.ainvoke({"messages": ["go"]}, thread_id="t")
    assert paused.interrupt.payload["tool_calls"] == [
        {"id": "call-1-1", "name": "mail", "args": {"to": "ann"}}
    ]
    done = await agent.ainvoke(None, thread_id="t", resume=Resume(answer))
    assert _results(done.state.messages) == [result, ("found x", "ok")]


def test_human_approval_needs_tool_names() -> None:
    with pytest.raises(GraphConfigError, match="names of the tools to approve"):
        HumanApproval([])


@pytest.mark.parametrize(
    ("middleware", "named"),
    [
        (HumanApproval(["mial", "look"]), "HumanApproval(tools=['look', 'mial'])"),
        (ToolCallLimit(run_limit=1, tool="mial"), "ToolCallLimit(run_limit=1, thread_limit=None"),
    ],
)
def test_a_tool_name_the_agent_does_not_have_is_refused_when_it_is_built(
    middleware: Middleware, named: str
) -> None:
    # Else the real tool would run without the approval or the limit meant for it.
    with pytest.raises(GraphConfigError) as caught:
        create_react_agent(ScriptedModel([]), [look, mail], middleware=[middleware])
    message = str(caught.value)
    assert message.startswith(named)
    assert message.endswith(
        "names the tool(s) 'mial', which the agent does not have: the tools are 'look', "
        "'mail'. Name one of them."
    )


def test_a_middleware_of_ones_own_names_its_tools_in_any_collection() -> None:
    class Watches(Middleware):
        def __init__(self, names: Any) -> None:
            self.names = names

        def tool_names(self) -> Any:
            return self.names

    create_react_agent(ScriptedModel([]), [look, mail], middleware=[Watches(["look"])])
    with pytest.raises(GraphConfigError, match=r"names the tool\(s\) 'mial'"):
        create_react_agent(ScriptedModel([]), [look, mail], middleware=[Watches(("mial",))])
    for bad in ("look", [3]):
        with pytest.raises(GraphConfigError, match=r"tool_names\(\) returned .*; return a coll"):
            create_react_agent(ScriptedModel([]), [look, mail], middleware=[Watches(bad)])


@settings(max_examples=25, deadline=None)
@given(
    replies=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=5),
    limit=st.integers(min_value=0, max_value=6),
)
def test_a_thread_never_runs_more_tool_calls_than_its_limit(replies: list[int], limit: int) -> None:
    script: list[Any] = [
        _calls(*[("look", {"q": f"{n}-{i}"}) for i in range(size)])
        for n, size in enumerate(replies)
    ]
    agent = create_react_agent(
        ScriptedModel([*script, "done"]), [look], middleware=[ToolCallLimit(thread_limit=limit)]
    )
    messages = agent.invoke({"messages": ["go"]}).state.messages
    statuses = [s for _, s in _results(messages)]
    assert statuses.count("ok") == min(sum(replies), limit)
    # The calls that ran are the first ones, in the order the model made them.
    assert statuses == ["ok"] * statuses.count("ok") + ["error"] * statuses.count("error")
