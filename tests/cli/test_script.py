"""The installed ``nodestep`` console script, run as a real process: the main paths a
person and a script take, exit codes, progress bars, and the missing extra."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import HERE, NODESTEP, run_script

pytestmark = pytest.mark.slow  # each test starts one or more Python processes


def test_the_console_script_is_installed() -> None:
    assert NODESTEP.is_file(), "install nodestep (pip install -e '.[cli]') for its script"


def test_run_asks_at_the_prompt_and_answers_through_stdin(tmp_path: Path) -> None:
    ran = run_script(
        [
            "run",
            "blog:graph",
            "--input",
            '{"topic": "food"}',
            "--thread",
            "blog-1",
            "--store",
            "history.db",
        ],
        cwd=tmp_path,
        input='"publish"\n',
    )
    assert ran.code == 0, ran.err
    assert "review:verdict (node review) asks:" in ran.err
    assert "answer for review:verdict (JSON, or text):" in ran.err
    for line in (
        "superstep 0 done",
        '  task write: drafts=["a post on tea"]',
        "superstep 1 done",
        '  task review: verdict="publish"',
    ):
        assert line in ran.err.splitlines()
    assert "thread blog-1: completed" in ran.out and '"publish"' in ran.out


def test_a_forked_thread_as_a_table_and_as_json(tmp_path: Path) -> None:
    store = ["--store", "history.db"]
    run_script(
        ["run", "blog:graph", "--input", '{"topic": "food"}', "--thread", "blog-1", *store],
        cwd=tmp_path,
        input="publish\n",
    )
    fork = run_script(
        ["fork", "blog-1", "--at", "7", "--branch", "retry", "--graph", "blog:graph", *store],
        cwd=tmp_path,
    )
    assert fork.code == 0, fork.err
    assert fork.out.startswith("branch retry of thread blog-1: forked from main at event 7")
    table = run_script(["branches", "blog-1", *store], cwd=tmp_path)
    assert "retry" in table.out and "main" in table.out
    listed = json.loads(run_script(["branches", "blog-1", *store, "--json"], cwd=tmp_path).out)
    assert [(b["branch"], b["parent"], b["from_seq"]) for b in listed] == [("retry", "main", 7)]
    again = run_script(
        ["run", "blog:graph", "--thread", "blog-1", "--branch", "retry", *store],
        cwd=tmp_path,
        input="reject\n",
    )
    assert again.code == 0 and '"reject"' in again.out
    history = json.loads(
        run_script(["history", "blog-1", "--branch", "retry", *store, "--json"], cwd=tmp_path).out
    )
    assert [r["type"] for r in history] == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "run_completed",
    ]
    diff = run_script(["diff", "blog-1", "main", "retry", *store], cwd=tmp_path)
    assert diff.code == 0 and '~ verdict: "publish" -> "reject"' in diff.out
    assert "fork point: main@7 run_paused review" in diff.out
    found = json.loads(
        run_script(["diff", "blog-1", "main", "retry", *store, "--json"], cwd=tmp_path).out
    )
    assert found["changes"] == [
        {"field": "verdict", "change": "changed", "a": "publish", "b": "reject"}
    ]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (
            ["history", "nope", "--store", "h.db"],
            1,
            "nodestep history: no store at",
        ),
        (["threads", "--store", "h.db", "--limit", "0"], 2, "Invalid value for '--limit'"),
        (["history"], 2, "Missing argument 'THREAD'"),
        (["nosuch"], 2, "No such command 'nosuch'"),
        (["run", "nowhere:graph"], 1, "no module named 'nowhere'"),
        (["threads", "--store", "ftp://x"], 1, "unknown scheme 'ftp:'"),
    ],
)
def test_errors_are_one_line_with_the_documented_exit_code(
    tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    ran = run_script(args, cwd=tmp_path)
    assert ran.code == code
    assert says in ran.err
    assert "Traceback" not in ran.err
    if code == 1:
        assert len(ran.err.strip().splitlines()) == 1


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    ran = run_script(["threads", "--store", "ftp://x", "--debug"], cwd=tmp_path)
    assert ran.code == 1 and "Traceback (most recent call last)" in ran.err


def test_export_import_and_prune_show_progress_bars(tmp_path: Path) -> None:
    ran = run_script(
        ["run", "blog:counter", "--thread", "c-1", "--store", "a.db", "--quiet"], cwd=tmp_path
    )
    assert ran.code == 0 and ran.err == ""
    exported = run_script(["export", "c-1", "--store", "a.db", "-o", "c-1.jsonl"], cwd=tmp_path)
    records = (tmp_path / "c-1.jsonl").read_text().splitlines()
    assert exported.code == 0 and "export c-1 " in exported.err
    assert f"{len(records)}/{len(records)}" in exported.err
    imported = run_script(["import", "c-1.jsonl", "--store", "b.jsonl"], cwd=tmp_path)
    assert imported.code == 0 and f"imported thread c-1: {len(records)} records" in imported.out
    assert "read c-1.jsonl" in imported.err and "store" in imported.err
    pruned = run_script(["prune", "--keep-last", "5", "--store", "b.jsonl", "--json"], cwd=tmp_path)
    assert pruned.code == 0 and "prune " in pruned.err and "1/1" in pruned.err
    assert json.loads(pruned.out)["dropped"] > 0
    shown = json.loads(
        run_script(["show", "c-1", "--store", "b.jsonl", "--json"], cwd=tmp_path).out
    )
    assert shown["status"] == "completed"


def test_export_to_stdout_is_the_records_alone(tmp_path: Path) -> None:
    run_script(
        ["run", "blog:counter", "--thread", "c-1", "--store", "a.db", "--quiet"], cwd=tmp_path
    )
    ran = run_script(["export", "c-1", "--store", "a.db"], cwd=tmp_path)
    lines = [json.loads(line) for line in ran.out.splitlines()]
    assert lines[0]["type"] == "checkpoint" and lines[-1]["type"] == "export_checksum"
    assert ran.err == ""


def test_an_import_of_a_changed_export_is_refused_by_line(tmp_path: Path) -> None:
    run_script(
        ["run", "blog:counter", "--thread", "c-1", "--store", "a.db", "--quiet"], cwd=tmp_path
    )
    run_script(["export", "c-1", "--store", "a.db", "-o", "c.jsonl"], cwd=tmp_path)
    lines = (tmp_path / "c.jsonl").read_text().splitlines()
    changed = json.loads(lines[2])
    changed["ts"] += 1
    lines[2] = json.dumps(changed)
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    ran = run_script(["import", "c.jsonl", "--store", "b.db", "--quiet"], cwd=tmp_path)
    assert ran.code == 1 and "record 3 of the export" in ran.err


def test_without_click_and_rich_the_script_names_the_extra(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "rich"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no rich here', name='rich')\n")
    ran = run_script(["threads"], cwd=tmp_path, env={"PYTHONPATH": str(shadow.parent)})
    assert ran.code == 1
    assert ran.err == "nodestep: the command line needs rich: pip install 'nodestep[cli]'\n"


def test_help_lists_the_commands_and_the_exit_codes(tmp_path: Path) -> None:
    ran = run_script(["--help"], cwd=tmp_path)
    assert ran.code == 0
    for command in ("threads", "history", "show", "fork", "export", "run", "draw", "validate"):
        assert f"  {command} " in ran.out
    assert "Exit codes: 0 done, 1 an error" in ran.out


def test_on_a_terminal_run_shows_a_spinner_on_the_running_superstep(tmp_path: Path) -> None:
    # rich draws live displays where it is told stderr is an interactive terminal.
    ran = run_script(
        ["run", "blog:counter", "--store", "memory:"],
        cwd=tmp_path,
        env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"},
    )
    assert ran.code == 0
    assert "\x1b[?25l" in ran.err  # the cursor hidden while the spinner runs
    assert "superstep 69" in ran.err and "superstep 68 done" in ran.err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_answers_the_langgraph_api_for_the_graphs_it_names(tmp_path: Path) -> None:
    port = _free_port()
    environ = {**os.environ, "PYTHONPATH": str(HERE)}
    environ.pop("NODESTEP_STORE", None)
    server = subprocess.Popen(
        [
            str(NODESTEP),
            "serve",
            "blog:graph",
            "--port",
            str(port),
            "--store",
            f"sqlite://{tmp_path}/serve.db",
        ],
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(300):  # the server's start, polled: up to 30 s on a loaded machine
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=1) as r:
                    assert json.loads(r.read()) == {"ok": True}
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                time.sleep(0.1)
        else:
            raise AssertionError("nodestep serve did not answer /ok")
        ask = urllib.request.Request(
            f"http://127.0.0.1:{port}/assistants/search",
            data=b"{}",
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(ask, timeout=5) as r:
            assert [a["graph_id"] for a in json.loads(r.read())] == ["blog"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)  # waits, and closes the pipes
