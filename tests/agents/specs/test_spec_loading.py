"""Loading a specs folder: every problem named with its file, line and culprit, at once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from specs_helpers import CHAT, FUNCTIONS, GET_USER, write

from nodestep import Agent, GraphConfigError, InMemoryStateStore, ScriptedModel


def _load(tmp_path: Path, files: dict[str, str], **options: object) -> Agent:
    options.setdefault("functions", FUNCTIONS)
    return Agent(write(tmp_path, files), "chat", llm=ScriptedModel(["hi"]), **options)  # type: ignore[arg-type]


def _problems(tmp_path: Path, files: dict[str, str], **options: object) -> list[str]:
    with pytest.raises(GraphConfigError) as caught:
        _load(tmp_path, files, **options)
    assert caught.value.problems, str(caught.value)
    return list(caught.value.problems)


def test_a_folder_of_specs_loads_recursively_with_several_documents_per_file(tmp_path: Path):
    files = {
        "chat.yaml": CHAT,
        "tools/users.yml": GET_USER + "---\n" + "kind: Node\nname: spare\nfunc: users.get_user\n",
    }
    agent = _load(tmp_path, files)
    assert sorted(agent.graph.nodes) == ["chat", "get_user"]
    assert agent.start_node == "chat"


def test_an_unknown_tool_is_named_with_its_file_and_line(tmp_path: Path):
    (problem,) = _problems(tmp_path, {"chat.yaml": CHAT})
    assert problem.startswith(f"{tmp_path / 'specs' / 'chat.yaml'}:8:5: ")
    assert "unknown tool 'get_user'" in problem and "the ToolNodes are none" in problem


def test_an_openapi_tool_not_given_says_where_it_comes_from(tmp_path: Path):
    spec = CHAT.replace("get_user", "OpenAPI__get_user")
    (problem,) = _problems(tmp_path, {"chat.yaml": spec})
    assert "Agent(tools=openapi_tools(spec, base_url=...))" in problem


def test_a_func_that_does_not_resolve_is_a_problem_never_a_silent_no_op(tmp_path: Path):
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER.replace("users.get_user", "getuser")}
    (problem,) = _problems(tmp_path, files)
    assert "tool.yaml:6:7: " in problem and "'getuser' does not resolve" in problem


def test_a_func_path_whose_module_does_not_import_is_a_problem(tmp_path: Path):
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER.replace("users.get_user", "no_such_mod.fn")}
    (problem,) = _problems(tmp_path, files, functions=None)
    assert "tool.yaml:6:7: " in problem and "importing 'no_such_mod' failed" in problem


def test_a_node_without_func_is_a_problem_at_its_document(tmp_path: Path):
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "node.yaml": "kind: Node\nname: TestNode"}
    (problem,) = _problems(tmp_path, files)
    assert "node.yaml:1:1: " in problem and "Node 'TestNode' has no 'func'" in problem


def test_a_yaml_syntax_error_names_its_line(tmp_path: Path):
    broken = "kind: Node\nname: TestNode\nfunc: f\ndescription:\n  en: Test\n  invalid: [unclosed"
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "bad.yaml": broken}
    (problem,) = _problems(tmp_path, files)
    assert "bad.yaml:" in problem and "not valid YAML" in problem


def test_an_empty_file_is_a_problem(tmp_path: Path):
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "empty.yaml": ""}
    (problem,) = _problems(tmp_path, files)
    assert "empty.yaml:1:1: the file is empty" in problem


def test_an_unknown_kind_lists_the_kinds(tmp_path: Path):
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "x.yaml": "kind: Agent\nname: x\n"}
    (problem,) = _problems(tmp_path, files)
    assert "x.yaml:1:7: the kind 'Agent' is unknown; the kinds are LLMNode" in problem


_SPELLED = "kinds are written as they are spelled: did you mean 'LLMNode'?"
_OVERLAY = "overlays are not read (Liman 0.1.0 skips them too): write their keys in the node's"
_KINDLESS = "a spec without a 'kind'; give it one of LLMNode, ToolNode, FunctionNode, Node, Ser"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: llmnode\nname: x\n", f"1:7: the kind 'llmnode' is unknown; {_SPELLED}"),
        ("kind: Overlay\nto: LLMNode:chat\n", f"1:7: the kind 'Overlay' is unknown; {_OVERLAY}"),
        ("name: x\n", f"1:1: {_KINDLESS}"),
    ],
)
def test_a_kind_written_in_the_wrong_case_missing_or_an_overlay_says_the_fix(
    tmp_path: Path, text: str, expected: str
):
    (problem,) = _problems(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER, "x.yaml": text})
    assert f"x.yaml:{expected}" in problem


def test_keys_of_later_liman_releases_are_refused_saying_what_to_write_instead(
    tmp_path: Path,
):
    structured = "kind: LLMNode\nname: x\nstructured_output:\n  title: str\n"
    routed = "kind: Node\nname: n\nfunc: users.get_user\nto: [LLMNode/chat]\n"
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "x.yaml": structured, "y.yaml": routed}
    first, second = _problems(tmp_path, files)
    assert "/x.yaml:4:3: unknown key 'structured_output' in an LLMNode; Liman's" in first
    assert "create_react_agent(response_format=...); the keys are kind, name" in first
    assert "/y.yaml:4:5: unknown key 'to' in a Node; Liman's 'to' edges" in second
    assert "list them under 'nodes' (or a ToolNode's 'llm_nodes')" in second


CHAT_ONLY = "kind: LLMNode\nname: chat\n"
TOOL = CHAT_ONLY + "tools: [t]\n---\nkind: ToolNode\nname: t\nfunc: users.get_user\n"
ACCOUNT = "kind: ServiceAccount\nname: sa\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: LLMNode\nname: [chat, bot]", "name must be a non-blank string, got ['chat', 'bot"),
        (CHAT_ONLY + "tools: [[t]]\n", "'tools' must be a non-blank string, got ['t']"),
        (CHAT_ONLY + "nodes: [{target: [a, b]}]\n", "target is one node name, got the list ['a'"),
        (CHAT_ONLY + "nodes: [{target: chat, when: [a]}]\n", "condition string, got ['a']"),
        (CHAT_ONLY + "nodes: [n]\n---\nkind: Node\nname: n\nfunc: [a.b]\n", "path, got ['a.b']"),
        ("kind: [LLMNode]\nname: chat\n", "the kind ['LLMNode'] is unknown; the kinds are"),
        (ACCOUNT + "credentials_providers: [[tok]]\n", "non-blank string, got ['tok']"),
        (TOOL + "arguments: [{name: x, type: [[integer]]}]\n", "argument type ['integer']; the"),
        (TOOL + "arguments: [{name: x, type: str, optional: [yes]}]\n", "false, got [True]"),
    ],
)  # fmt: skip
def test_a_problem_shows_the_culprit_as_written_never_the_loaders_wrappers(
    tmp_path: Path, text: str, expected: str
):
    problems = _problems(tmp_path, {"x.yaml": text})
    assert any(expected in p for p in problems), problems
    assert not any("Y(value=" in p for p in problems), problems


PROMPTS = "kind: LLMNode\nname: chat\nprompts:\n  system:\n    en: Hi.\n"


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        (PROMPTS + "  notes:\n    en: {a: 1, b: yes}\n", "7:19", "got True at notes.en.b: a value"),
        (PROMPTS + "  notes: [a, [b, no]]\n", "6:18", "got False at notes[1][1]: a value"),
        (PROMPTS + "    ru:\n      de: Hallo\n", "7:11", "language 'de' is written inside"),
        (PROMPTS + "  en: Hi.\n", "6:7", "language 'en' holds both text and keys"),
    ],
)  # fmt: skip
def test_a_bundle_problem_points_at_its_culprit(tmp_path: Path, text: str, at: str, expected: str):
    (problem,) = _problems(tmp_path, {"chat.yaml": text})
    assert problem.startswith(f"{tmp_path / 'specs' / 'chat.yaml'}:{at}: the prompts of 'chat'")
    assert expected in problem


def test_a_null_in_a_bundle_loads_as_no_text(tmp_path: Path):
    # Liman's poc.mdx: `{ notes }` is YAML's mapping of notes to null, and Liman loads it.
    text = PROMPTS + "    ru: ~\n  notes:\n    en: { notes }\ndescription:\n"
    agent = _load(tmp_path, {"chat.yaml": text})
    assert agent.start_node == "chat"


def test_an_edge_takes_liman_id_and_depends_and_checks_their_shape(tmp_path: Path):
    good = (
        CHAT_ONLY + "nodes:\n  - {target: n, id: first}\n  - {target: n, id: second, depends: "
        "[first]}\n  - {target: n, depends: first, id: ~}\n---\nkind: Node\nname: n\nfunc: f\n"
    )
    agent = _load(tmp_path / "good", {"chat.yaml": good}, functions={"f": str.upper})
    assert sorted(agent.graph.nodes) == ["chat", "n"]
    bad = CHAT_ONLY + "nodes:\n  - {target: chat, id: [x], depends: [first, 2]}\n"
    problems = _problems(tmp_path / "bad", {"chat.yaml": bad})
    assert any(":4:24: an edge's id must be a non-blank string, got ['x']" in p for p in problems)
    assert any(":4:46: an edge's depends is an edge id or a list, got 2" in p for p in problems)


def test_two_edges_to_one_target_load(tmp_path: Path):
    chat = CHAT_ONLY + "nodes:\n  - {target: n, when: a}\n  - {target: n, when: b}\n"
    node = "kind: Node\nname: n\nfunc: f\n"
    agent = _load(tmp_path, {"chat.yaml": chat, "n.yaml": node}, functions={"f": str.upper})
    assert sorted(agent.graph.nodes) == ["chat", "n"]


def test_a_duplicate_name_points_at_both(tmp_path: Path):
    files = {
        "chat.yaml": CHAT,
        "tool.yaml": GET_USER,
        "again.yaml": CHAT.replace("tools:\n  - get_user\n", ""),
    }
    (problem,) = _problems(tmp_path, files)
    # Files load in name order: again.yaml comes first.
    assert "chat.yaml:2:7: a second node named 'chat' (the first is at" in problem
    assert "again.yaml:2:7)" in problem


def test_an_unknown_start_node_lists_the_llm_nodes(tmp_path: Path):
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    with pytest.raises(
        GraphConfigError, match=r"Unknown start node 'LLMNode/chta'.*LLMNodes are chat"
    ):
        Agent(specs, start_node="LLMNode/chta", llm=ScriptedModel([]), functions=FUNCTIONS)
    with pytest.raises(GraphConfigError, match="Unknown start node 'ToolNode/chat'"):
        Agent(specs, start_node="ToolNode/chat", llm=ScriptedModel([]), functions=FUNCTIONS)


def test_every_problem_is_reported_at_once(tmp_path: Path):
    bad_tool = GET_USER.replace("integer", "decimal").replace("users.get_user", "nowhere")
    files = {"chat.yaml": CHAT + "colour: blue\n", "tool.yaml": bad_tool, "e.yaml": ""}
    problems = _problems(tmp_path, files)
    assert len(problems) == 4
    assert any("unknown key 'colour' in an LLMNode" in p for p in problems)
    assert any("unknown argument type 'decimal'" in p for p in problems)
    assert any("'nowhere' does not resolve" in p for p in problems)


def test_python_tags_are_refused_and_nothing_runs(tmp_path: Path):
    evil = "kind: Node\nname: evil\nfunc: !!python/name:os.system\n"
    problems = _problems(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER, "evil.yaml": evil})
    assert any(
        "the tag 'tag:yaml.org,2002:python/name:os.system' is not allowed" in p for p in problems
    )


def test_nothing_is_stored_when_the_specs_do_not_load(tmp_path: Path):
    store = InMemoryStateStore()
    _problems(tmp_path, {"chat.yaml": CHAT}, state_store=store)
    assert anyio.run(lambda: store.list_threads()).threads == []


def test_edges_name_existing_targets_of_the_right_kind(tmp_path: Path):
    tool = GET_USER + "llm_nodes:\n  - target: nobody\n  - target: get_user\n"
    problems = _problems(tmp_path, {"chat.yaml": CHAT, "tool.yaml": tool})
    assert any(":12:13: unknown target 'nobody'" in p for p in problems), problems
    assert any("'get_user' is a ToolNode, not an LLMNode" in p for p in problems)


def test_a_condition_that_does_not_parse_points_into_the_file(tmp_path: Path):
    tool = GET_USER + "llm_nodes:\n  - target: chat\n    when: lang ==\n"
    (problem,) = _problems(tmp_path, {"chat.yaml": CHAT, "tool.yaml": tool})
    assert "tool.yaml:13:18: condition 'lang ==': expected a value" in problem


def test_a_tool_function_that_needs_an_undeclared_parameter_is_a_problem(tmp_path: Path):
    def lookup(user_id: int, region: str) -> str:
        return ""

    (problem,) = _problems(
        tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER}, functions={"users.get_user": lookup}
    )
    assert "needs the parameter 'region'" in problem


def test_a_service_account_gives_context_or_credentials(tmp_path: Path):
    account = "kind: ServiceAccount\nname: TestServiceAccount"
    files = {"chat.yaml": CHAT, "tool.yaml": GET_USER, "sa.yaml": account}
    (problem,) = _problems(tmp_path, files)
    assert "sa.yaml:1:1: ServiceAccount 'TestServiceAccount' gives nothing" in problem


def test_an_unknown_service_account_is_named(tmp_path: Path):
    tool = GET_USER + "auth:\n  service_account: Nobody\n"
    (problem,) = _problems(tmp_path, {"chat.yaml": CHAT, "tool.yaml": tool})
    assert "unknown service account 'Nobody'" in problem


def test_functions_must_map_strings_to_callables(tmp_path: Path):
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    with pytest.raises(GraphConfigError, match="maps func strings to callables"):
        Agent(specs, "chat", llm=ScriptedModel([]), functions={"users.get_user": 3})  # type: ignore[dict-item]


def test_a_store_that_is_not_one_is_refused(tmp_path: Path):
    specs = write(tmp_path, {"chat.yaml": CHAT, "tool.yaml": GET_USER})
    with pytest.raises(GraphConfigError, match="takes a store, a store URL"):
        Agent(specs, "chat", llm=ScriptedModel([]), functions=FUNCTIONS, state_store=3)  # type: ignore[arg-type]


def test_a_condition_problem_in_a_folded_block_points_inside_it(tmp_path: Path):
    text = (
        "kind: LLMNode\nname: chat\nnodes:\n  - target: other\n    when: >-\n"
        "      lang == 'en' and\n      user.tier === 'gold'\n"
        "---\nkind: LLMNode\nname: other\n"
    )
    with pytest.raises(GraphConfigError) as info:
        Agent(write(tmp_path, {"a.yaml": text}), "chat", llm=ScriptedModel(["x"]))
    # Line 7, at the third '=': the folded text's own place, not the block's first line.
    assert ":7:19: condition \"lang == 'en' and user.tier === 'gold'\"" in str(info.value)
