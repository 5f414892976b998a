"""``load_target``: each form of target, and a clear error for each way one is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import Agent, Graph, GraphConfigError
from nodestep.cli import load_target

HERE = Path(__file__).resolve().parent
LIMAN = HERE.parent / "data" / "liman" / "getting_started"

TICKETS = """\
nodestep: 1
kind: Graph
name: tickets
state: tickets:Ticket
start: work
nodes:
  - name: work
    function: tickets:work
    edges:
      - target: retry
        when: retry_count < 3
      - target: END
  - name: retry
    function: tickets:retry
    edges: [{target: work}]
"""


def _error(text: str) -> str:
    with pytest.raises(GraphConfigError) as caught:
        load_target(text)
    return str(caught.value)


def test_a_module_attribute_is_loaded() -> None:
    import blog

    assert load_target("blog:graph") is blog.graph


def test_a_file_attribute_is_loaded_from_its_path() -> None:
    graph = load_target(f"{HERE / 'blog.py'}:graph")
    assert isinstance(graph, Graph) and graph.name == "blog"


def test_a_yaml_file_and_a_folder_of_manifests_are_loaded(tmp_path: Path) -> None:
    (tmp_path / "graph.yaml").write_text(TICKETS)
    for text in (str(tmp_path / "graph.yaml"), str(tmp_path)):
        graph = load_target(text)
        assert isinstance(graph, Graph) and graph.name == "tickets"


def test_a_folder_of_specs_is_an_agent_started_at_its_only_llm_node() -> None:
    agent = load_target(str(LIMAN / "simple_agent" / "specs"))
    assert isinstance(agent, Agent) and agent.start_node == "chat"
    named = load_target(f"{LIMAN / 'simple_agent' / 'specs'}:chat")
    assert isinstance(named, Agent) and named.start_node == "chat"


def test_a_specs_folder_with_several_llm_nodes_asks_which(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / f"{name}.yaml").write_text(
            f"kind: LLMNode\nname: {name}\nprompts:\n  system:\n    en: hi\n"
        )
    assert "name the start LLMNode as" in _error(str(tmp_path))
    assert "it has one, two" in _error(str(tmp_path))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "A target is a non-empty string"),
        ("blog", "has no ':attr'"),
        ("no_such_module:graph", "no module named 'no_such_module'"),
        ("blog:nope", "'blog' has no attribute 'nope'; it has counter, graph, job"),
        ("tickets:not_a_graph", "is a int, not a nodestep Graph or Agent"),
        ("tickets:make_graph", "(call it and name the result)"),
        ("tickets:nope", "it defines no Graph"),
        ("missing.py:graph", "no file 'missing.py'"),
        ("missing.yaml", "no file 'missing.yaml'"),
        ("not a module:graph", "is not a module name or a file that exists"),
    ],
)
def test_each_wrong_target_gets_an_error_naming_it(text: str, says: str) -> None:
    assert says in _error(text)


def test_a_python_file_without_an_attribute_asks_for_one() -> None:
    assert "names a Python file but no attribute; write" in _error(str(HERE / "blog.py"))


def test_a_module_that_raises_on_import_says_what_it_raised(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('no config')\n")
    message = _error(f"{tmp_path / 'broken.py'}:graph")
    assert "raised RuntimeError: no config" in message


def test_a_manifest_with_problems_names_each_with_file_and_line(tmp_path: Path) -> None:
    bad = TICKETS.replace("tickets:work", "tickets:nowhere").replace("target: END", "target: nope")
    (tmp_path / "graph.yaml").write_text(bad)
    with pytest.raises(GraphConfigError) as caught:
        load_target(str(tmp_path / "graph.yaml"))
    problems = caught.value.problems
    assert len(problems) >= 2
    assert all(p.startswith(f"{tmp_path / 'graph.yaml'}:") for p in problems)
