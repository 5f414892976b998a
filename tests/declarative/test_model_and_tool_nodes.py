"""Model and tool nodes in YAML manifests: ``type: llm``, ``type: tool``, prebuilt nodes."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodestep import (
    GraphConfigError,
    NodeDeclaration,
    NodeType,
    ScriptedModel,
    ScriptedReply,
    load_graph,
    node,
    tool,
)
from nodestep.agents import agent_node_types


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@pytest.fixture(autouse=True)
def chatapp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``chatapp``: a state with a conversation, one without, tools, nodes."""
    package = tmp_path / "pkgs" / "chatapp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "parts.py").write_text(
        textwrap.dedent(
            """
            from pydantic import Field

            from nodestep import BaseState, MessagesState, ScriptedModel, model_node, node, tool
            from nodestep.agents import MessageList, tool_node


            class Chat(MessagesState):
                turns: int = 0


            class Plain(BaseState):
                text: str = ""


            class Unmerged(BaseState):
                messages: list = Field(default_factory=list)


            @tool
            def lookup(city: str) -> str:
                \"\"\"Look up the weather of a city.\"\"\"
                return f"sunny in {city}"


            def shout(text: str) -> str:
                \"\"\"Say it loud.\"\"\"
                return text.upper()


            def count(chat: Chat) -> dict:
                return {"turns": chat.turns + 1}


            counted = node(count, name="counter")
            helper = model_node(ScriptedModel(["prebuilt says hi"]), name="helper")
            runner = tool_node([lookup], name="runner")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    yield package
    for name in [m for m in sys.modules if m == "chatapp" or m.startswith("chatapp.")]:
        del sys.modules[name]


HEADER = """\
nodestep: 1
kind: Graph
name: chat
state: chatapp.parts:Chat
start: agent
"""

CHAT = (
    HEADER
    + """\
nodes:
  - name: agent
    type: llm
    model: main
    system: Answer in one line.
    tools: [add, chatapp.parts:lookup]
    edges:
      - {target: tools, when: has_tool_calls}
      - {target: END}
  - name: tools
    type: tool
    tools: [add, chatapp.parts:lookup]
    edges: [{target: agent}]
"""
)


def _write(tmp_path: Path, text: str, name: str = "graph.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path, **options: Any) -> list[str]:
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path, **options)
    return caught.value.problems


def _at(path: Path, line: int, problems: list[str]) -> str:
    found = [p for p in problems if re.match(rf"{re.escape(str(path))}:{line}:\d+: ", p)]
    assert found, problems
    return found[0]


def test_a_model_node_and_a_tool_node_declared_in_yaml_run_a_tool_round_trip(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[("add", {"a": 2, "b": 3}), ("lookup", {"city": "Oslo"})]),
            ScriptedReply("5, and sunny.", expect="sunny in Oslo"),
        ]
    )
    path = _write(tmp_path, CHAT)
    graph = load_graph(path, node_types=agent_node_types(models={"main": model}, tools=[add]))
    result = graph.invoke({"messages": "2+3, and the weather in Oslo?"})
    assert [(m.role, m.content) for m in result.state.messages] == [
        ("user", "2+3, and the weather in Oslo?"),
        ("assistant", ""),
        ("tool", "5"),
        ("tool", "sunny in Oslo"),
        ("assistant", "5, and sunny."),
    ]
    sent = model.calls[0]
    assert (sent[0].role, sent[0].content) == ("system", "Answer in one line.")
    assert [m.role for m in result.state.messages].count("system") == 0


def test_the_model_is_told_of_the_tools_its_node_lists(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    class Recording(ScriptedModel):
        async def complete(self, messages: Any, tools: Any = None) -> Any:
            seen.append([t["name"] for t in tools or []])
            return await super().complete(messages, tools)

    model = Recording(["hi"])
    text = CHAT.replace("    system: Answer in one line.\n", "    stream: false\n")
    path = _write(tmp_path, text)
    load_graph(path, node_types=agent_node_types(models={"main": model}, tools=[add])).invoke(
        {"messages": "hello"}
    )
    assert seen == [["add", "lookup"]]


def test_a_manifest_naming_a_prebuilt_node_runs_it_under_the_manifests_name(
    tmp_path: Path,
) -> None:
    text = HEADER.replace("start: agent", "start: greet") + textwrap.dedent(
        """\
        nodes:
          - name: greet
            function: chatapp.parts:helper
            edges: [{target: count}]
          - name: count
            function: chatapp.parts:counted
            retry: {attempts: 2}
            edges: [{target: END}]
        """
    )
    graph = load_graph(_write(tmp_path, text))
    result = graph.invoke({"messages": "hi"})
    assert [m.content for m in result.state.messages] == ["hi", "prebuilt says hi"]
    assert result.state.turns == 1
    assert [n for n in graph.nodes] == ["greet", "count"]
    assert graph.nodes["count"].retry is not None
    from chatapp.parts import counted

    assert counted.name == "counter" and counted.retry is None  # the object is left alone


def test_a_prebuilt_node_outside_the_allowed_packages_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pkgs" / "chatapp" / "reexport.py").write_text(
        "from nodestep import node\n\n"
        "def shout(text: str) -> dict:\n    return {}\n\n"
        "loud = node(shout)\n"
    )
    text = HEADER.replace("start: agent", "start: loud") + textwrap.dedent(
        """\
        nodes:
          - name: loud
            function: chatapp.reexport:loud
            edges: [{target: END}]
        """
    )
    path = _write(tmp_path, text)
    problem = _at(path, 8, _problems(path, allowed_packages=["otherapp"]))
    assert "outside the allowed packages" in problem
    # A node nodestep made runs nodestep's code: allowed once its module is.
    text = text.replace("chatapp.reexport:loud", "chatapp.parts:helper")
    load_graph(_write(tmp_path, text), allowed_packages=["chatapp"])


def test_every_problem_of_model_and_tool_nodes_is_placed_at_once(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent(
        """\
        nodes:
          - name: agent
            type: llm
            model: large
            tools: [add, nosuch]
            edges:
              - {target: tools, when: has_tool_calls}
              - {target: END}
          - name: tools
            type: tool
            tools: [chatapp.parts:missing, chatapp.parts:Chat]
            edges: [{target: agent}]
          - name: bare
            type: llm
            edges: [{target: END}]
        """
    )
    path = _write(tmp_path, text)
    problems = _problems(path, node_types=agent_node_types(models={"main": ScriptedModel([])}))
    assert len(problems) == 6, problems
    model = _at(path, 9, problems)
    assert "names the model 'large', which is not among the models (main)" in model
    assert "agent_node_types(models={'large': model})" in model
    unknown = _at(path, 10, problems)
    assert "unknown tool 'add'" in unknown  # not given in tools=: only import paths work
    assert "pass it as agent_node_types(tools=[...])" in unknown
    assert "unknown tool 'nosuch'" in _at(path, 10, problems[2:])
    missing = _at(path, 16, problems)
    assert "'chatapp.parts:missing': 'chatapp.parts' has no 'missing'" in missing
    assert "'chatapp.parts:Chat' is a class, not a tool" in _at(path, 16, problems[4:])
    assert "node 'bare' of type llm needs 'model'" in _at(path, 18, problems)


def test_a_node_without_its_required_key_names_the_key(tmp_path: Path) -> None:
    text = HEADER.replace("start: agent", "start: bare") + textwrap.dedent(
        """\
        nodes:
          - name: bare
            type: llm
            edges: [{target: END}]
        """
    )
    path = _write(tmp_path, text)
    problem = _at(path, 7, _problems(path, node_types=agent_node_types()))
    assert "node 'bare' of type llm needs 'model'" in problem


def test_a_model_node_on_a_state_without_a_merged_messages_field_is_refused(
    tmp_path: Path,
) -> None:
    for state, why in [
        ("Plain", "but Plain has none"),
        ("Unmerged", "which has no add_messages reducer"),
    ]:
        path = _write(tmp_path, CHAT.replace("chatapp.parts:Chat", f"chatapp.parts:{state}"))
        types = agent_node_types(models={"main": ScriptedModel([])}, tools=[add])
        problems = _problems(path, node_types=types)
        assert len(problems) == 2, problems  # the model node and the tool node
        problem = _at(path, 8, problems)
        assert why in problem
        assert "messages: Messages = Field(default_factory=MessageList)" in problem


def test_llm_and_tool_types_without_node_types_say_where_they_come_from(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, CHAT)
    problems = _problems(path)
    problem = _at(path, 8, problems)
    assert "unknown node type 'llm'; the types are function, update" in problem
    assert "node_types=agent_node_types(models={...}, tools=[...])" in problem
    assert any("unknown key 'model'" in p for p in problems)


def test_function_and_update_on_a_model_or_tool_node_are_keys_the_type_lacks(
    tmp_path: Path,
) -> None:
    text = CHAT.replace(
        "    model: main\n", "    model: main\n    function: chatapp.parts:lookup\n"
    ).replace("    type: tool\n", "    type: tool\n    update: {messages: []}\n")
    path = _write(tmp_path, text)
    types = agent_node_types(models={"main": ScriptedModel([])}, tools=[add])
    problems = _problems(path, node_types=types)
    assert len(problems) == 2, problems
    function = _at(path, 10, problems)
    assert "node 'agent' of type llm has 'function:', which the type does not use" in function
    assert "(its keys: model, system, tools, stream, conversation); remove it" in function
    assert "node 'tools' of type tool has 'update:'" in _at(path, 18, problems)


def test_to_yaml_writes_model_and_tool_nodes_back_as_declared(tmp_path: Path) -> None:
    def types() -> dict[str, NodeType]:
        model = ScriptedModel([ScriptedReply(tool_calls=[("add", {"a": 1, "b": 1})]), "2"])
        return agent_node_types(models={"main": model}, tools=[add])

    graph = load_graph(_write(tmp_path, CHAT), node_types=types())
    text = graph.to_yaml()
    assert "type: llm" in text and "model: main" in text and "type: tool" in text
    again = load_graph(_write(tmp_path, text, "again.yaml"), node_types=types())
    assert again.to_yaml() == text
    result = again.invoke({"messages": "1+1?"})
    assert result.state.messages[-1].content == "2"


def test_to_yaml_refuses_a_prebuilt_model_node_naming_it(tmp_path: Path) -> None:
    text = HEADER.replace("start: agent", "start: greet") + textwrap.dedent(
        """\
        nodes:
          - name: greet
            function: chatapp.parts:helper
            edges: [{target: END}]
        """
    )
    graph = load_graph(_write(tmp_path, text))
    with pytest.raises(GraphConfigError) as caught:
        graph.to_yaml()
    assert "Node 'greet' runs a function that has no import path" in str(caught.value)


def test_a_node_type_of_ones_own_builds_nodes_with_the_manifests_settings(
    tmp_path: Path,
) -> None:
    def build(declared: NodeDeclaration) -> Any:
        word = declared.value("word")
        if not isinstance(word, str):
            declared.problem(f"'word' takes text, got {word!r}", "word")
            return None

        def say(state: Any) -> dict[str, Any]:
            return {"messages": [("assistant", word)]}

        return node(say, name=declared.name)

    types = {"say": NodeType(build, keys=("word",), required=("word",))}
    text = HEADER + textwrap.dedent(
        """\
        nodes:
          - name: agent
            type: say
            word: hello
            timeout: 5
            edges: [{target: END}]
        """
    )
    graph = load_graph(_write(tmp_path, text), node_types=types)
    assert graph.nodes["agent"].timeout == 5.0
    assert graph.invoke({"messages": "hi"}).state.messages[-1].content == "hello"
    path = _write(tmp_path, text.replace("word: hello", "word: [1]"))
    assert "'word' takes text, got [1]" in _at(path, 9, _problems(path, node_types=types))


def test_node_types_must_be_node_type_objects_and_never_replace_the_built_in_ones(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, CHAT)
    with pytest.raises(GraphConfigError, match="maps type names to NodeType objects"):
        load_graph(path, node_types={"llm": object()})  # type: ignore[dict-item]
    kind = NodeType(lambda declared: None)
    with pytest.raises(GraphConfigError, match="cannot replace the built-in node type"):
        load_graph(path, node_types={"function": kind})


def test_a_liman_specs_folder_given_to_load_graph_points_to_agent(tmp_path: Path) -> None:
    liman = Path(__file__).resolve().parents[1] / "data" / "liman" / "getting_started"
    folder = liman / "adding_tools" / "specs"
    with pytest.raises(GraphConfigError) as caught:
        load_graph(folder)
    problems = caught.value.problems
    assert any("a Liman LLMNode document" in p for p in problems), problems
    assert any("a Liman ToolNode document" in p for p in problems), problems
    for problem in problems[:2]:
        assert problem.startswith(str(folder))
        assert "runs with nodestep.Agent(specs_dir" in problem
        assert "'type: llm' or 'type: tool'" in problem


def test_a_prebuilt_model_node_on_a_state_without_messages_is_refused_at_its_place(
    tmp_path: Path,
) -> None:
    text = HEADER.replace("chatapp.parts:Chat", "chatapp.parts:Plain").replace(
        "start: agent", "start: greet"
    ) + textwrap.dedent(
        """\
        nodes:
          - name: greet
            function: chatapp.parts:helper
            edges: [{target: END}]
        """
    )
    path = _write(tmp_path, text)
    problem = _at(path, 7, _problems(path))
    assert "reads the conversation from the state's 'messages' field, but Plain has none" in problem


def test_the_json_schema_with_the_agent_types_checks_their_keys() -> None:
    import jsonschema
    import yaml

    from nodestep import manifest_json_schema

    document = yaml.safe_load(CHAT)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, manifest_json_schema())
    schema = manifest_json_schema(node_types=agent_node_types())
    jsonschema.validate(document, schema)
    document["nodes"][0]["stream"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


def test_agent_node_types_refuses_what_is_not_a_model_or_a_tool() -> None:
    with pytest.raises(GraphConfigError, match="maps names to chat models"):
        agent_node_types(models={"main": "gpt-4"})  # type: ignore[dict-item]
    with pytest.raises(GraphConfigError, match="takes @tool functions"):
        agent_node_types(tools=[print])  # type: ignore[list-item]
    with pytest.raises(GraphConfigError, match="Two tools are named 'add'"):
        agent_node_types(tools=[add, add])
