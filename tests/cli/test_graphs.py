"""``run``, ``draw``, ``validate`` and ``serve``, in this process."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from cli_helpers import invoke, run_script
from test_target import LIMAN, TICKETS


def test_draw_prints_mermaid_by_default() -> None:
    import blog

    result = invoke(["draw", "blog:graph"])
    assert result.exit_code == 0
    assert result.stdout.strip() == blog.graph.to_mermaid().strip()


def test_draw_writes_svg_to_a_file(tmp_path: Path) -> None:
    import blog

    out = tmp_path / "blog.svg"
    result = invoke(["draw", "blog:graph", "--format", "svg", "-o", str(out)])
    assert result.exit_code == 0 and f"wrote svg to {out}" in result.stderr
    assert out.read_text() == blog.graph.to_svg()


def test_draw_of_an_agent_draws_its_graph() -> None:
    result = invoke(["draw", str(LIMAN / "simple_agent" / "specs")])
    assert result.exit_code == 0 and "chat" in result.stdout


def test_validate_says_ok_for_good_manifests(tmp_path: Path) -> None:
    (tmp_path / "graph.yaml").write_text(TICKETS)
    result = invoke(["validate", str(tmp_path)])
    assert result.exit_code == 0 and "ok (graph 'tickets')" in result.stdout


def test_validate_lists_every_problem_with_its_file_and_line(tmp_path: Path) -> None:
    bad = TICKETS.replace("tickets:work", "tickets:nowhere").replace("target: END", "target: nope")
    (tmp_path / "graph.yaml").write_text(bad)
    result = invoke(["validate", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == f"{tmp_path}: {len(lines) - 1} problem(s)"
    assert len(lines) >= 3 and all(
        line.startswith(f"{tmp_path / 'graph.yaml'}:") for line in lines[:-1]
    )
    checked = json.loads(invoke(["validate", str(tmp_path), "--json"]).stdout)
    assert checked["ok"] is False and checked["problems"] == lines[:-1]


def test_validate_checks_a_specs_folder(tmp_path: Path) -> None:
    assert invoke(["validate", str(LIMAN / "simple_agent" / "specs")]).exit_code == 0
    (tmp_path / "chat.yaml").write_text("kind: LLMNode\nname: chat\ntools: [nowhere]\n")
    result = invoke(["validate", str(tmp_path)])
    assert result.exit_code == 1 and "chat.yaml:" in result.stderr


def test_validate_of_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    assert invoke(["validate", str(tmp_path / "nope")]).exit_code == 2


def test_run_answers_the_interrupt_from_stdin_and_keeps_the_thread(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/h.db"
    result = invoke(
        [
            "run",
            "blog:graph",
            "--input",
            '{"topic": "food"}',
            "--thread",
            "t1",
            "--store",
            url,
            "--json",
        ],
        input='"publish"\n',
    )
    assert result.exit_code == 0, result.output
    ran = json.loads(result.stdout)
    assert ran["status"] == "completed" and ran["state"]["verdict"] == "publish"
    history = json.loads(invoke(["history", "t1", "--store", url, "--json"]).stdout)
    assert history[-1]["type"] == "run_completed"


def test_run_prints_each_superstep_and_task() -> None:
    result = invoke(["run", "blog:graph", "--input", '{"topic": "x"}'], input="ok\n")
    assert result.exit_code == 0
    assert "superstep 0 done" in result.stderr
    assert 'task write[1]: drafts=["a post on cake"]' in result.stderr
    assert "review:verdict (node review) asks" in result.stderr
    assert '"ok"' in result.stdout  # text that is not JSON is answered as a string


def test_run_with_input_that_is_not_a_json_object_is_a_usage_error() -> None:
    for text in ("{nope", "[1, 2]"):
        result = invoke(["run", "blog:graph", "--input", text])
        assert result.exit_code == 2 and "--input" in result.stderr


def test_run_of_a_target_that_does_not_load_is_one_line() -> None:
    result = invoke(["run", "blog:nope"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "nodestep run: GraphConfigError: Target 'blog:nope': 'blog' has no attribute 'nope'; "
        "it has counter, graph, job."
    )


def test_serve_without_the_server_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail as it does where the extra is missing.
    monkeypatch.setitem(sys.modules, "nodestep.serve", None)
    result = invoke(["serve", "blog:graph"])
    assert result.exit_code == 1
    assert "pip install 'nodestep[serve]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_without_an_answer_keeps_the_pause_and_a_second_run_answers_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path}/h.db"
    first = invoke(
        ["run", "blog:graph", "--input", "{}", "--thread", "t", "--store", url], input=""
    )
    assert first.exit_code == 1
    assert first.stderr.strip().splitlines()[-1] == (
        "nodestep run: no answer for review:verdict; thread 't' stays paused: run it again "
        "with --thread t to answer"
    )
    shown = json.loads(invoke(["show", "t", "--store", url, "--json"]).stdout)
    assert shown["status"] == "paused"
    second = invoke(["run", "blog:graph", "--thread", "t", "--store", url, "--json"], input="yes\n")
    assert second.exit_code == 0 and json.loads(second.stdout)["state"]["verdict"] == "yes"


def test_serve_gives_the_workers_each_graphs_module_path(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def serve(graphs: dict[str, object], **options: object) -> None:
        seen.update(options, names=list(graphs))

    monkeypatch.setitem(sys.modules, "nodestep.serve", types.SimpleNamespace(serve=serve))
    queue = "postgresql://app@db/shop"
    result = invoke(["serve", "counts=blog:graph", "--workers", queue, "--store", queue])
    assert result.exit_code == 0, result.stderr
    assert seen["names"] == ["counts"]
    assert (seen["workers"], seen["graph_paths"]) == (queue, {"counts": "blog:graph"})


def test_a_manifest_imports_the_modules_of_the_working_directory(tmp_path: Path) -> None:
    # As `python -m` does, for a manifest as for a module target: the console script's own
    # folder is on the path, not the working directory, unless nodestep puts it there.
    (tmp_path / "desk.py").write_text(
        "from nodestep import BaseState\n\n\n"
        "class Desk(BaseState):\n    count: int = 0\n\n\n"
        "def work(state: Desk) -> dict:\n    return {'count': state.count + 1}\n"
    )
    (tmp_path / "desk.yaml").write_text(
        "nodestep: 1\nkind: Graph\nname: desk\nstate: desk:Desk\nstart: work\n"
        "nodes:\n  - name: work\n    function: desk:work\n    edges:\n      - target: END\n"
    )
    ran = run_script(["validate", "desk.yaml"], cwd=tmp_path, env={"PYTHONPATH": ""})
    assert (ran.code, ran.err) == (0, ""), ran
    assert "desk.yaml" in ran.out
