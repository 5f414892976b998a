"""Agent.step: the conversation, the system prompt, tool calls and where their results go."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, ByPrompt, write

from nodestep import Agent, GraphConfigError, ModelError, ScriptedModel
from nodestep.agents import AgentStep, ScriptedReply, SystemMessage, ToolCall, ToolMessage

pytestmark = pytest.mark.anyio


def _agent(
    tmp_path: Path, script: list[Any], files: dict[str, str] | None = None, **options: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    files = files or {"chat.yaml": CHAT, "tool.yaml": GET_USER}
    options.setdefault("functions", FUNCTIONS)
    return Agent(write(tmp_path, files), start_node="chat", llm=model, **options), model


async def test_a_step_answers_and_the_next_continues_the_same_conversation(tmp_path: Path):
    agent, model = _agent(tmp_path, ["Hello!", "You said hello."])
    first = await agent.step("hello", context={"lang": "en", "user": {"id": 7}})
    assert isinstance(first, AgentStep)
    assert (first.output, first.status, str(first)) == ("Hello!", "completed", "Hello!")
    second = await agent.step("and then?")
    assert second.execution_id == first.execution_id == agent.execution_id
    assert [m.content for m in model.calls[1][1:]] == ["hello", "Hello!", "and then?"]


async def test_an_execution_id_picks_the_conversation(tmp_path: Path):
    agent, _ = _agent(tmp_path, ["one", "two", "three"])
    a = await agent.step("a")
    b = await agent.step("b", execution_id="other")
    assert b.execution_id == "other" and a.execution_id != "other"
    c = await agent.step("c", execution_id=a.execution_id)
    assert (a.output, b.output, c.output) == ("one", "one", "two")


@pytest.mark.parametrize("bad", ["", 5, b"other"])
async def test_an_execution_id_that_is_not_a_non_empty_string_is_refused(tmp_path: Path, bad: Any):
    agent, model = _agent(tmp_path, ["one", "two"])
    first = await agent.step("a")
    with pytest.raises(GraphConfigError, match=r"Agent\.step takes execution_id as a non-empty"):
        await agent.step("b", execution_id=bad)
    with pytest.raises(GraphConfigError, match=r"Agent\.stream takes execution_id"):
        async for _ in agent.stream("b", execution_id=bad):
            pass
    with pytest.raises(GraphConfigError, match=r"Agent\.node_state takes execution_id"):
        await agent.node_state("chat", execution_id=bad)
    # Nothing ran, and the agent still continues the conversation it stepped last.
    assert len(model.calls) == 1 and agent.execution_id == first.execution_id
    assert (await agent.step("c")).execution_id == first.execution_id


def test_step_sync_works_without_and_inside_a_running_loop(tmp_path: Path):
    agent, _ = _agent(tmp_path, ["one", "two"])
    assert agent.step_sync("a").output == "one"

    async def in_a_notebook_cell() -> str:
        return agent.step_sync("b").output  # the loop is running, as in Jupyter

    assert asyncio.run(in_a_notebook_cell()) == "two"


async def test_a_system_prompt_of_tools_only_has_no_blank_line_around_it(tmp_path: Path):
    chat = "kind: LLMNode\nname: chat\ntools: [get_user]\n"
    blank = "kind: LLMNode\nname: chat\nprompts: {system: '  '}\ntools: [get_user]\n"
    for text in (chat, blank):
        agent, model = _agent(tmp_path, ["ok"], {"chat.yaml": text, "tool.yaml": GET_USER})
        await agent.step("hi")
        assert model.calls[0][0].content == "get_user - Find a user by id"


async def test_the_system_prompt_lists_each_tool_with_its_triggers_and_template(tmp_path: Path):
    tool = (
        GET_USER
        + "triggers:\n  - who is user 7?\n  - en: find user 9\n    ru: найди пользователя 9\n"
    )
    other = """
    kind: ToolNode
    name: ping
    description: Check the service
    func: users.get_user
    arguments: [{name: user_id, type: int}]
    tool_prompt_template:
      en: "Tool {name}: {description} {not_a_placeholder}"
    """
    chat = CHAT.replace("  - get_user\n", "  - get_user\n  - ping\n")
    files = {"chat.yaml": chat, "tool.yaml": tool, "ping.yaml": other}
    agent, model = _agent(tmp_path, ["ok", "ок"], files)
    await agent.step("hi")
    system = model.calls[0][0]
    assert isinstance(system, SystemMessage)
    assert system.content == (
        "You answer questions about users.\n"
        "get_user - Find a user by id\n- who is user 7?\n- find user 9\n"
        "Tool ping: Check the service {not_a_placeholder}"
    )
    await agent.step("привет", context={"lang": "ru"})
    assert model.calls[1][0].content.startswith(
        "Ты отвечаешь на вопросы о пользователях.\nget_user - Найти пользователя по id\n"
        "- who is user 7?\n- найди пользователя 9\n"
    )


async def test_a_missing_language_falls_back_to_english_key_by_key(tmp_path: Path):
    chat = """
    kind: LLMNode
    name: chat
    prompts:
      en:
        system: You are helpful.
      de:
        notes: unused
    """
    agent, model = _agent(tmp_path, ["a", "b"], {"chat.yaml": chat})
    await agent.step("hi", context={"lang": "de"})
    await agent.step("hi", context={"lang": "fr"})
    assert model.calls[0][0].content == "You are helpful."
    assert model.calls[1][0].content == "You are helpful."


@pytest.mark.parametrize("lang", ["ru-RU", "RU", "ru_RU", " ru "])
async def test_a_language_with_a_region_or_in_capitals_picks_its_prompts(tmp_path: Path, lang: str):
    agent, model = _agent(tmp_path, ["ок"])
    await agent.step("привет", context={"lang": lang})
    assert model.calls[0][0].content.startswith("Ты отвечаешь на вопросы о пользователях.")
    assert model.calls[0][0].content.endswith("get_user - Найти пользователя по id")


async def test_an_unknown_language_reads_english_and_a_language_not_text_is_refused(
    tmp_path: Path,
):
    agent, model = _agent(tmp_path, ["a", "b"])
    await agent.step("hi", context={"lang": "xx-YY"})
    await agent.step("hi", context={"lang": None})
    assert [call[0].content for call in model.calls] == [
        "You answer questions about users.\nget_user - Find a user by id"
    ] * 2
    with pytest.raises(GraphConfigError, match=r"context\['lang'\] is a language code .* got 7"):
        await agent.step("hi", context={"lang": 7})
    assert len(model.calls) == 2


async def test_the_model_is_told_the_tools_in_the_call_language(tmp_path: Path):
    agent, model = _agent(tmp_path, ["a"])
    seen: list[Any] = []
    complete = model.complete

    async def spy(messages: Any, tools: Any = ()) -> Any:
        seen.append(tools)
        return await complete(messages, tools)

    model.complete = spy  # type: ignore[method-assign]
    await agent.step("hi", context={"lang": "ru"})
    (spec,) = seen[0]
    assert spec["name"] == "get_user" and spec["description"] == "Найти пользователя по id"
    assert spec["parameters"]["properties"]["user_id"] == {
        "type": "integer",
        "description": "The user's id",
    }
    assert spec["parameters"]["required"] == ["user_id"]


async def test_arguments_are_converted_to_their_declared_type(tmp_path: Path):
    script = [ScriptedReply(tool_calls=[("get_user", {"user_id": "7"})]), "done"]
    agent, model = _agent(tmp_path, script)
    assert (await agent.step("who is 7?")).output == "done"
    result = model.calls[1][-1]
    assert isinstance(result, ToolMessage) and result.content == "user 7 (int)"
    state = await agent.node_state("get_user")
    assert state.input == {"name": "get_user", "args": {"user_id": "7"}}
    assert (state.status, state.output, state.has_error) == ("completed", "user 7 (int)", False)


async def test_a_bad_argument_goes_back_to_the_model_naming_the_argument(tmp_path: Path):
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": "seven"})]),
        ScriptedReply(tool_calls=[("get_user", {"id": 7})], expect="user_id"),
        ScriptedReply("sorry", expect="id: Extra inputs are not permitted"),
    ]
    agent, model = _agent(tmp_path, script)
    out = await agent.step("who is seven?")
    assert out.status == "completed" and out.output == "sorry"
    first = model.calls[1][-1]
    assert first.status == "error"
    assert first.content.startswith("Error: the arguments of get_user are not valid: user_id: ")
    state = await agent.node_state("get_user")
    assert state.has_error and "user_id: Field required" in (state.error or "")


async def test_a_boolean_is_not_taken_for_a_number(tmp_path: Path):
    tool = """
    kind: ToolNode
    name: refund
    description: Refund an amount
    func: shop.refund
    arguments:
      - {name: amount, type: integer}
      - {name: rate, type: number, optional: true}
      - {name: code, type: [string, integer], optional: true}
      - {name: flag, type: [boolean, integer], optional: true}
    """
    calls = [("refund", {"amount": True}), ("refund", {"amount": 1, "rate": False})]
    calls += [("refund", {"amount": 1, "code": True}), ("refund", {"amount": 2, "flag": True})]
    script = [ScriptedReply(tool_calls=calls), "done"]
    chat = CHAT.replace("get_user", "refund")
    functions = {"shop.refund": lambda **kw: f"refunded {kw}"}
    files = {"chat.yaml": chat, "t.yaml": tool}
    agent, model = _agent(tmp_path, script, files, functions=functions)
    assert (await agent.step("refund")).status == "completed"
    bad = "Error: the arguments of refund are not valid: "
    fix = ", not a boolean. Call it again with arguments that fit its parameters."
    assert [m.content for m in model.calls[1][-4:]] == [
        bad + "amount: Input should be a valid integer" + fix,
        bad + "rate: Input should be a valid number" + fix,
        bad + "code: Input should be a valid string or a valid integer" + fix,
        "refunded {'amount': 2, 'flag': True}",
    ]


async def test_arguments_may_be_named_as_pydantic_names_its_own_members(tmp_path: Path):
    tool = """
    kind: ToolNode
    name: configure
    description: Configure a car
    func: cars.configure
    arguments:
      - {name: model_config, type: string}
      - {name: model_dump, type: integer, optional: true}
      - {name: _private, type: object, properties: [{name: model_validate, type: integer}]}
    """
    args = {"model_config": "sport", "_private": {"model_validate": "3"}}
    script = [
        ScriptedReply(tool_calls=[("configure", args), ("configure", {"model_configx": "a"})]),
        "done",
    ]
    chat = CHAT.replace("get_user", "configure")
    functions = {"cars.configure": lambda **kw: f"configured {kw}"}
    files = {"chat.yaml": chat, "t.yaml": tool}
    agent, model = _agent(tmp_path, script, files, functions=functions)
    assert (await agent.step("configure")).output == "done"
    done, refused = model.calls[1][-2:]
    assert done.content == "configured {'model_config': 'sport', '_private': {'model_validate': 3}}"
    assert refused.status == "error" and "model_config: Field required" in refused.content
    assert "model_configx: Extra inputs are not permitted" in refused.content


async def test_an_unknown_tool_name_goes_back_to_the_model(tmp_path: Path):
    script = [ScriptedReply(tool_calls=[("get_usr", {"user_id": 1})]), "oops"]
    agent, model = _agent(tmp_path, script)
    assert (await agent.step("x")).output == "oops"
    message = model.calls[1][-1]
    assert message.status == "error"
    assert (
        message.content
        == "Error: there is no tool 'get_usr'; the tools are get_user. Call one of them."
    )


@pytest.mark.parametrize("given", ["same", ""])
async def test_calls_of_one_reply_with_one_id_or_none_each_get_their_own_result(
    tmp_path: Path, given: str
):
    calls = [ToolCall(name="get_user", args={"user_id": n}, id=given) for n in (7, 9)]
    agent, model = _agent(tmp_path, [ScriptedReply(tool_calls=calls), "done", "more"])
    await agent.step("x")
    stored = model.calls[1][2]
    first, second = stored.tool_calls
    assert first.id != second.id and (given == "" or first.id == "same")
    answers = [(m.tool_call_id, m.content) for m in model.calls[1][3:]]
    assert answers == [
        (first.id, FUNCTIONS["users.get_user"](7)),
        (second.id, FUNCTIONS["users.get_user"](9)),
    ]
    await agent.step("y")  # the stored conversation answers each call once
    assert [m.tool_call_id for m in model.calls[2][3:5]] == [first.id, second.id]


async def test_a_tool_that_returns_utf8_bytes_answers_with_their_text(tmp_path: Path):
    def get_user(user_id: int) -> bytes:
        return f'{{"id": {user_id}, "name": "Zoë"}}'.encode()

    script = [ScriptedReply(tool_calls=[("get_user", {"user_id": 7})]), "done"]
    agent, model = _agent(tmp_path, script, functions={"users.get_user": get_user})
    await agent.step("x")
    assert model.calls[1][-1].content == '{"id": 7, "name": "Zoë"}'


async def test_tool_calls_of_one_reply_run_together_and_answer_in_call_order(tmp_path: Path):
    started = threading.Event()

    def waits(user_id: int) -> str:
        assert started.wait(5), "the other call never ran beside this one"
        return f"waited {user_id}"

    def sets(user_id: int) -> str:
        started.set()
        return f"set {user_id}"

    other = GET_USER.replace("name: get_user", "name: set_flag").replace(
        "users.get_user", "flags.set"
    )
    chat = CHAT.replace("  - get_user\n", "  - get_user\n  - set_flag\n")
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 1}), ("set_flag", {"user_id": 2})]),
        "both",
    ]
    files = {"chat.yaml": chat, "tool.yaml": GET_USER, "flag.yaml": other}
    functions = {"users.get_user": waits, "flags.set": sets}
    agent, model = _agent(tmp_path, script, files, functions=functions)
    assert (await agent.step("go")).output == "both"
    assert [m.content for m in model.calls[1][-2:]] == ["waited 1", "set 2"]


async def test_a_tool_edge_whose_condition_holds_on_the_context_hands_the_result_on(tmp_path: Path):
    tool = (
        GET_USER
        + "llm_nodes:\n  - target: summarize\n    when: user.tier == 'gold' and lang != 'de'\n"
    )
    summarize = """
    kind: LLMNode
    name: summarize
    prompts:
      system: You summarize records.
    """
    files = {"chat.yaml": CHAT, "tool.yaml": tool, "sum.yaml": summarize}
    chat_script = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("get_user", {"user_id": 3})]),
            ScriptedReply(tool_calls=[("get_user", {"user_id": 4})]),
            ScriptedReply("Back at chat", expect="user 4"),
        ]
    )
    summary = ScriptedModel([ScriptedReply("Gold summary", expect="user 3")])
    model = ByPrompt({"You answer": chat_script, "You summarize": summary})
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions=FUNCTIONS)
    gold = await agent.step("who is 3?", context={"user": {"tier": "gold"}, "lang": "en"})
    assert gold.output == "Gold summary"
    assert summary.calls[0][1].content == "user 3 (int)"
    plain = await agent.step("who is 4?", context={"user": {"tier": "basic"}, "lang": "en"})
    assert plain.output == "Back at chat"
    chat = await agent.node_state("chat")
    # chat's call of step one got its result too, so its conversation stays whole.
    assert [type(m).__name__ for m in chat.messages] == [
        "UserMessage", "AssistantMessage", "ToolMessage", "UserMessage", "AssistantMessage",
        "ToolMessage", "AssistantMessage",
    ]  # fmt: skip


async def test_a_registered_function_decides_an_edge(tmp_path: Path):
    calls: list[Any] = []

    def is_vip() -> bool:
        calls.append("asked")
        return True

    tool = GET_USER + "llm_nodes:\n  - target: summarize\n    when: rules.is_vip\n"
    summarize = "kind: LLMNode\nname: summarize\nprompts: {system: Sum.}\n"
    files = {"chat.yaml": CHAT, "tool.yaml": tool, "sum.yaml": summarize}
    script = [ScriptedReply(tool_calls=[("get_user", {"user_id": 3})]), "summary"]
    functions = {**FUNCTIONS, "rules.is_vip": is_vip}
    agent, _ = _agent(tmp_path, script, files, functions=functions)
    # The context has a 'rules' key too: the registered function wins.
    out = await agent.step("x", context={"rules": {"is_vip": False}})
    assert out.output == "summary" and calls == ["asked"]


async def test_an_edges_depends_is_not_acted_on_as_in_liman(tmp_path: Path):
    # Liman's docs: an edge with depends is followed once the edges it names are resolved;
    # Liman 0.1.0 never reads depends, and nodestep does not either. The second edge
    # depends on the first, which does not hold, and is followed all the same.
    tool = GET_USER + (
        "llm_nodes:\n"
        "  - {target: summarize, id: gold, when: user.tier == 'gold'}\n"
        "  - {target: summarize, id: basic, depends: [gold], when: user.tier == 'basic'}\n"
    )
    summarize = "kind: LLMNode\nname: summarize\nprompts: {system: You summarize.}\n"
    files = {"chat.yaml": CHAT, "tool.yaml": tool, "sum.yaml": summarize}
    chat = ScriptedModel([ScriptedReply(tool_calls=[("get_user", {"user_id": 3})])])
    summary = ScriptedModel([ScriptedReply("Basic summary", expect="user 3")])
    model = ByPrompt({"You answer": chat, "You summarize": summary})
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions=FUNCTIONS)
    out = await agent.step("who is 3?", context={"user": {"tier": "basic"}})
    assert (out.status, out.output) == ("completed", "Basic summary")


async def test_a_registered_function_of_one_argument_gets_the_call_context(tmp_path: Path):
    seen: list[Any] = []

    def is_vip(context: dict[str, Any]) -> bool:
        seen.append(context)
        return bool(context["user"]["tier"] == "gold")

    chat = CHAT.replace("tools:\n  - get_user\n", "nodes:\n  - {target: vip, when: rules.is_vip}\n")
    vip = "kind: Node\nname: vip\nfunc: shop.vip\n"
    functions = {"rules.is_vip": is_vip, "shop.vip": lambda text: f"VIP: {text}"}
    files = {"chat.yaml": chat, "vip.yaml": vip}
    agent, _ = _agent(tmp_path, ["Hello.", "Hi."], files, functions=functions)
    gold = await agent.step("x", context={"user": {"tier": "gold"}})
    basic = await agent.step("y", context={"user": {"tier": "basic"}})
    assert (gold.status, gold.output, basic.output) == ("completed", "VIP: Hello.", "Hi.")
    assert seen == [{"user": {"tier": "gold"}}, {"user": {"tier": "basic"}}]


async def test_function_nodes_are_steps_of_the_flow(tmp_path: Path):
    chat = CHAT.replace("tools:\n  - get_user\n", "nodes:\n  - target: shout\n    when: loud\n")
    shout = "kind: FunctionNode\nname: shout\nfunc: text.shout\nllm_nodes: [polish]\n"
    polish = "kind: LLMNode\nname: polish\nprompts: {system: Polish it.}\n"
    files = {"chat.yaml": chat, "shout.yaml": shout, "polish.yaml": polish}
    polished = ScriptedModel(["HELLO, THERE!"])
    model = ByPrompt({"You answer": ScriptedModel(["hello there", "quiet"]), "Polish": polished})
    agent = Agent(write(tmp_path, files), "chat", llm=model, functions={"text.shout": str.upper})
    out = await agent.step("greet", context={"loud": True})
    assert out.output == "HELLO, THERE!"
    assert polished.calls[0][-1].content == "HELLO THERE"
    state = await agent.node_state("shout")
    assert (state.kind, state.status, state.input, state.output) == (
        "FunctionNode",
        "completed",
        "hello there",
        "HELLO THERE",
    )
    assert (await agent.step("greet", context={"loud": False})).output == "quiet"


async def test_node_state_of_a_node_that_never_ran_is_idle(tmp_path: Path):
    agent, _ = _agent(tmp_path, ["a"])
    assert (await agent.node_state("get_user")).status == "idle"
    await agent.step("x")
    tool = await agent.node_state("get_user")
    chat = await agent.node_state("chat")
    assert (tool.status, tool.messages, chat.status, chat.kind) == (
        "idle",
        (),
        "completed",
        "LLMNode",
    )
    with pytest.raises(Exception, match="no node 'nope'; its nodes are chat, get_user"):
        await agent.node_state("nope")


async def test_the_engine_runs_on_trio_too(tmp_path: Path, anyio_backend: str):
    agent, _ = _agent(tmp_path, [ScriptedReply(tool_calls=[("get_user", {"user_id": 1})]), "ok"])
    assert (await agent.step("x")).output == "ok"
    await anyio.sleep(0)


async def test_a_replys_only_tool_call_runs_on_the_loop_thread_and_two_calls_in_threads(
    tmp_path: Path,
):
    loop_thread = threading.get_ident()
    seen: dict[str, bool] = {}

    def get_user(user_id: int) -> str:
        seen[f"get_user {user_id}"] = threading.get_ident() == loop_thread
        return f"user {user_id}"

    def set_flag(user_id: int) -> str:
        seen[f"set_flag {user_id}"] = threading.get_ident() == loop_thread
        return f"flag {user_id}"

    other = GET_USER.replace("name: get_user", "name: set_flag").replace(
        "users.get_user", "flags.set"
    )
    chat = CHAT.replace("  - get_user\n", "  - get_user\n  - set_flag\n")
    script = [
        ScriptedReply(tool_calls=[("get_user", {"user_id": 1})]),
        ScriptedReply(tool_calls=[("get_user", {"user_id": 2}), ("set_flag", {"user_id": 3})]),
        "done",
    ]
    files = {"chat.yaml": chat, "tool.yaml": GET_USER, "flag.yaml": other}
    functions = {"users.get_user": get_user, "flags.set": set_flag}
    agent, _ = _agent(tmp_path, script, files, functions=functions)
    assert (await agent.step("go")).output == "done"
    assert seen == {"get_user 1": True, "get_user 2": False, "set_flag 3": False}


async def test_a_lone_call_of_a_tool_node_with_a_timeout_runs_in_a_worker_thread(
    tmp_path: Path,
):
    loop_thread = threading.get_ident()
    seen: list[bool] = []

    def get_user(user_id: int) -> str:
        seen.append(threading.get_ident() == loop_thread)
        return f"user {user_id}"

    timed = GET_USER + "timeout: 30\n"
    script = [ScriptedReply(tool_calls=[("get_user", {"user_id": 1})]), "done"]
    files = {"chat.yaml": CHAT, "tool.yaml": timed}
    agent, _ = _agent(tmp_path, script, files, functions={"users.get_user": get_user})
    assert (await agent.step("go")).output == "done"
    assert seen == [False]


async def test_step_input_runs_the_agents_graph_as_a_step_does(tmp_path: Path):
    import json

    from nodestep import GraphConfigError

    agent, _ = _agent(tmp_path, ["one"])
    patch = agent.step_input("hi")
    assert json.loads(json.dumps(patch)) == patch  # plain JSON, as a client sends it
    await agent.graph.ainvoke(patch, thread_id="t", context={})
    chat = await agent.node_state("chat", execution_id="t")
    assert (chat.status, [m.content for m in chat.messages]) == ("completed", ["hi", "one"])
    with pytest.raises(GraphConfigError, match="takes the user's text as a string, got int"):
        agent.step_input(5)  # type: ignore[arg-type]


async def test_record_failure_records_a_failed_run_of_the_graph_as_a_step_does(tmp_path: Path):
    # The graph run directly (as a server runs it) fails at its model's first call.
    agent, _ = _agent(tmp_path, [])
    secret = "ctx-secret-4471"
    with pytest.raises(ModelError, match="asked for reply 1"):
        await agent.graph.ainvoke(agent.step_input("hi"), thread_id="t", context={})
    chat = await agent.node_state("chat", execution_id="t")
    assert chat.status == "running"  # what the run left
    error = RuntimeError(f"model down for {secret}")
    failed = await agent.record_failure("t", error, context={"key": secret})
    chat = await agent.node_state("chat", execution_id="t")
    assert failed == ("chat",)
    assert (chat.status, chat.has_error) == ("failed", True)
    assert chat.error == "RuntimeError: model down for [context]"
    state = (await agent.graph.get_state("t")).value
    assert all(d is None for d in state.inbox.values())  # the next step starts clean
    assert await agent.record_failure("t", "again") == ()  # nothing is running any more


class _TextModel:
    """A chat model whose complete() returns text, not the AssistantMessage it must."""

    name = "texty"

    async def complete(self, messages: list[Any], tools: list[Any] | None = None, **_: Any) -> Any:
        return "just text"

    async def stream(self, messages: list[Any], tools: list[Any] | None = None, **_: Any) -> Any:
        raise NotImplementedError  # not streamed here
        yield


async def test_a_model_reply_that_is_no_assistant_message_fails_the_step_naming_the_model(
    tmp_path: Path,
):
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER}
    agent = Agent(write(tmp_path, files), start_node="chat", llm=_TextModel(), functions=FUNCTIONS)
    with pytest.raises(ModelError, match=r"Model 'texty' returned a str from complete\(\)"):
        await agent.graph.ainvoke(agent.step_input("hi"), thread_id="t", context={})
    failed = await agent.step("hi")
    assert failed.status == "failed"
    assert "Model 'texty' returned a str from complete(); it must return an AssistantMessage" in (
        str(failed.error)
    )
