"""Hostile manifests: every one is a ``GraphConfigError`` at its file and line, never a raw
Python exception, and the loader imports code only as the allow-list lets it."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodestep import GraphConfigError, load_graph

HEADER = """\
nodestep: 1
kind: Graph
name: g
state: redapp.nodes:Ticket
"""
NODES = """\
nodes:
  - name: work
    function: redapp.nodes:work
    edges: [{target: END}]
"""


@pytest.fixture(autouse=True)
def redapp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``redapp`` whose module ``nodes`` holds a node, a state, and traps."""
    package = tmp_path / "pkgs" / "redapp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nodes.py").write_text(
        textwrap.dedent(
            """
            import os
            from os import getenv
            from os.path import join as joined

            from nodestep import BaseState, Node, node
            from otherpkg import elsewhere

            RAN = []


            class Ticket(BaseState):
                status: str = ""


            def work(t: Ticket) -> dict[str, object]:
                return {"status": "done"}


            made = node(work, name="made")
            borrowed = node(elsewhere)


            class Special(Node):
                pass


            special = Special(work, name="special")


            class Trap:
                @property
                def value(self):
                    RAN.append("property getter")
                    return work


            trap = Trap()


            class Holder:
                @staticmethod
                def inner(t: Ticket) -> dict[str, object]:
                    return {"status": "inner"}


            def __getattr__(name):
                RAN.append(f"module __getattr__ {name}")
                return work
            """
        )
    )
    other = tmp_path / "pkgs" / "otherpkg"
    other.mkdir()
    (other / "__init__.py").write_text("def elsewhere(t):\n    return {'status': 'elsewhere'}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("redapp", "otherpkg")]:
        del sys.modules[name]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path, **options: object) -> list[str]:
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path, **options)  # type: ignore[arg-type]
    return list(caught.value.problems)


def _at(path: Path, line: int, problems: list[str]) -> str:
    """Return the one problem placed at ``line`` of ``path``."""
    found = [p for p in problems if re.match(rf"{re.escape(str(path))}:{line}:\d+: ", p)]
    assert len(found) == 1, problems
    return found[0]


@pytest.mark.parametrize("depth", [200, 5_000, 100_000])
@pytest.mark.parametrize(("open_", "close"), [("[", "]"), ("{a: ", "}"), ("- ", "")])
def test_deep_nesting_is_a_config_error_at_its_line_not_a_recursion_error(
    tmp_path: Path, depth: int, open_: str, close: str
) -> None:
    # Block style: '- - - x' nests a list in a list on one line.
    block = open_ == "- "
    nested = "\n  " + open_ * depth + "x" if block else open_ * depth + "x" + close * depth
    path = _write(tmp_path, HEADER + "start: work\n" + NODES + "description: " + nested + "\n")
    (problem,) = _problems(path)
    line = int(problem[len(str(path)) + 1 :].split(":")[0])
    assert "nest deeper than 100 levels" in problem
    assert line == (10 if open_ != "- " else 11)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1" * 4301, "an integer of more than 4,300 digits"),
        ("!!int abc", "'abc' is not a valid !!int"),
        ("!!float abc", "'abc' is not a valid !!float"),
        ("!!bool maybe", "'maybe' is not a valid !!bool"),
        ("!!int 0x", "'0x' is not a valid !!int"),
    ],
)
def test_a_scalar_its_tag_cannot_read_is_a_config_error_at_its_line(
    tmp_path: Path, value: str, message: str
) -> None:
    path = _write(tmp_path, HEADER + "start: work\ndescription: " + value + "\n" + NODES)
    problem = _at(path, 6, _problems(path))
    assert message in problem
    assert "1" * 100 not in problem  # the value is not copied into the message whole


@pytest.mark.parametrize("start", ["[work]", "{a: 1}", "[]", "{}"])
def test_a_start_that_is_not_a_node_name_is_a_config_error_at_its_line(
    tmp_path: Path, start: str
) -> None:
    path = _write(tmp_path, HEADER + f"start: {start}\n" + NODES)
    assert "start takes the name of a node, e.g. 'start: work'" in _at(path, 5, _problems(path))


@pytest.mark.parametrize("version", ["true", "false", "1.0", "'1'", "[1]"])
def test_only_the_whole_number_1_is_a_manifest_version(tmp_path: Path, version: str) -> None:
    text = HEADER.replace("nodestep: 1", f"nodestep: {version}") + "start: work\n" + NODES
    path = _write(tmp_path, text)
    problems = _problems(path)
    assert problems[0].startswith(f"{path}:1:11: this nodestep reads manifest version 1")


def test_a_manifest_naming_a_prebuilt_node_runs_it_under_the_manifests_name(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, HEADER + "start: work\n" + NODES.replace(":work", ":made"))
    graph = load_graph(path, allowed_packages=["redapp"])
    assert list(graph.nodes) == ["work"]
    assert graph.invoke({}).state.status == "done"


def test_a_prebuilt_node_of_a_function_outside_the_allowed_packages_is_refused(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, HEADER + "start: work\n" + NODES.replace(":work", ":borrowed"))
    problem = _at(path, 8, _problems(path, allowed_packages=["redapp"]))
    assert "'redapp.nodes:borrowed' is a node whose function is defined in 'otherpkg'" in problem
    assert "outside the allowed packages (redapp)" in problem
    load_graph(path)  # without an allow-list, any package may be used


def test_an_object_of_a_node_subclass_is_refused_as_another_object(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER + "start: work\n" + NODES.replace(":work", ":special"))
    problem = _at(path, 8, _problems(path))
    assert "which is a Special object" in problem
    assert "or a node made with @node, model_node or tool_node" in problem


def _function_problem(tmp_path: Path, function: str, **options: object) -> str:
    path = _write(tmp_path, HEADER + "start: work\n" + NODES.replace("redapp.nodes:work", function))
    return _at(path, 8, _problems(path, **options))


@pytest.mark.parametrize("allowed", [["redapp"], None])
@pytest.mark.parametrize(
    "function", ["redapp.nodes:os.environ.get", "redapp.nodes:os.getcwd", "redapp.nodes:os"]
)
def test_an_import_path_never_walks_into_another_module(
    tmp_path: Path, function: str, allowed: list[str] | None
) -> None:
    problem = _function_problem(tmp_path, function, allowed_packages=allowed)
    assert "'redapp.nodes:os', which is a module" in problem
    assert "a manifest names a function or class defined in a module" in problem


@pytest.mark.parametrize(
    ("function", "home"), [("redapp.nodes:getenv", "os"), ("redapp.nodes:joined", "posixpath")]
)
def test_a_function_imported_from_outside_the_allowed_packages_is_refused(
    tmp_path: Path, function: str, home: str
) -> None:
    problem = _function_problem(tmp_path, function, allowed_packages=["redapp"])
    assert f"is defined in '{home}', outside the allowed packages (redapp)" in problem


def test_resolving_a_path_runs_no_property_getter_or_module_getattr(tmp_path: Path) -> None:
    problem = _function_problem(tmp_path, "redapp.nodes:trap.value")
    assert "'redapp.nodes:trap', which is a Trap object" in problem
    missing = _function_problem(tmp_path, "redapp.nodes:nowhere")
    assert "'redapp.nodes' has no 'nowhere'" in missing
    assert sys.modules["redapp.nodes"].RAN == []


def test_a_function_or_class_of_an_allowed_module_still_resolves(tmp_path: Path) -> None:
    for function in ("redapp.nodes:work", "redapp.nodes:Holder.inner"):
        text = HEADER + "start: work\n" + NODES.replace("redapp.nodes:work", function)
        graph = load_graph(_write(tmp_path, text), allowed_packages=["redapp"])
        assert graph.invoke({}).state.status in ("done", "inner")
    assert sys.modules["redapp.nodes"].RAN == []


BIG = "9" * 4000  # under Python's 4,300 digits, so YAML reads it; far past a float


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (f"timeout: {BIG}", "'timeout' takes a positive number of seconds"),
        (f"retry: {{attempts: 2, backoff: {BIG}}}", "'retry' 'backoff' takes a number"),
        (f"retry: {{attempts: 2, multiplier: {BIG}}}", "'retry' 'multiplier' takes a number"),
        (f"circuit_breaker: {{failures: 2, cooldown: {BIG}}}", "'cooldown' takes a number"),
        (f"cache: {{ttl: {BIG}}}", "'cache' 'ttl' takes a positive number of seconds"),
    ],
)
def test_a_number_too_large_for_a_float_is_a_config_error_at_its_setting(
    tmp_path: Path, setting: str, message: str
) -> None:
    nodes = NODES.replace("    edges:", f"    {setting}\n    edges:")
    path = _write(tmp_path, HEADER + "start: work\n" + nodes)
    problem = _at(path, 9, _problems(path))
    assert message in problem
    assert "an integer larger than a float holds (at most 1.8e+308)" in problem
    assert "9" * 100 not in problem  # the value is not copied into the message whole


def test_a_graph_timeout_too_large_for_a_float_is_a_config_error_at_its_line(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, HEADER + f"start: work\ntimeout: {BIG}\n" + NODES)
    problem = _at(path, 6, _problems(path))
    assert "timeout takes a positive number of seconds, got an integer larger than" in problem


def test_an_alias_is_a_config_error_at_the_alias_not_at_its_anchor(tmp_path: Path) -> None:
    text = HEADER.replace("name: g", "name: &n g") + "start: work\n" + NODES
    path = _write(tmp_path, text.replace("    edges:", "    description: *n\n    edges:"))
    assert _problems(path) == [
        f"{path}:9:18: YAML aliases (*name) are not allowed in a manifest; repeat the value"
    ]


def test_an_alias_of_a_whole_node_is_one_problem_at_the_alias(tmp_path: Path) -> None:
    nodes = NODES.replace("  - name: work", "  - &w\n    name: work") + "  - *w\n"
    path = _write(tmp_path, HEADER + "start: work\n" + nodes)
    assert _problems(path) == [
        f"{path}:11:5: YAML aliases (*name) are not allowed in a manifest; repeat the value"
    ]
