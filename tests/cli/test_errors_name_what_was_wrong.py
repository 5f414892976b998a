"""Errors of the command line that a user's typo reaches: on stderr, exit code 1 (2 for a
usage error), saying what was wrong, never a traceback, never a wrong reason."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from cli_helpers import invoke, write_blog_thread


def test_draw_to_a_folder_that_does_not_exist_is_one_line_naming_the_file(
    tmp_path: Path,
) -> None:
    out = tmp_path / "no-such-folder" / "blog.svg"
    result = invoke(["draw", "blog:graph", "--format", "svg", "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        f"nodestep draw: cannot write {str(out)!r}: No such file or directory; give -o a "
        f"file in a folder that exists and may be written"
    ]


def test_an_event_number_below_the_first_of_a_whole_branch_is_not_said_pruned(
    store_url: str,
) -> None:
    write_blog_thread(store_url)
    result = invoke(["show", "blog-1", "--at", "0", "--store", store_url])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "nodestep show: branch 'main' of thread 'blog-1' has no event 0: its sequence "
        "numbers run from 1 to 7"
    )


def test_fork_names_its_own_option_for_the_branch_an_event_is_on(store_url: str) -> None:
    # fork's --branch names the new branch; the branch --at counts on is --from-branch,
    # so an error that said "give --branch main" sent the user to a refusal.
    write_blog_thread(store_url)
    store = ["--store", store_url]
    made = invoke(["fork", "blog-1", "--at", "1", "--branch", "b", *store])
    assert made.exit_code == 0, made.output
    early = invoke(["fork", "blog-1", "--at", "1", "--from-branch", "b", "--branch", "c", *store])
    assert early.exit_code == 1
    assert early.stderr.strip().endswith(
        "(it was forked from branch 'main' after event 1: give --from-branch main for the "
        "events before)"
    )
    first = json.loads(invoke(["history", "blog-1", "--json", *store]).stdout)[0]["id"]
    elsewhere = invoke(["fork", "blog-1", "--at", first, "--from-branch", "b", *store])
    assert elsewhere.exit_code == 1
    assert elsewhere.stderr.strip().endswith(
        "is on branch 'main', not 'b'; drop --from-branch or write --from-branch main"
    )


def test_run_with_an_empty_thread_is_a_usage_error_not_a_new_random_thread(
    tmp_path: Path,
) -> None:
    # --thread "$T" with T unset: a new thread under a random id would hide the mistake.
    store = f"sqlite://{tmp_path}/h.db"
    result = invoke(["run", "blog:graph", "--thread", "", "--store", store], input="ok\n")
    assert result.exit_code == 2
    assert "Invalid value for --thread: '' is empty; name the thread" in result.stderr
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400"])
@pytest.mark.parametrize(
    "args",
    [["threads", "--updated-after"], ["threads", "--updated-before"], ["prune", "--older-than"]],
)
def test_a_number_that_is_no_time_is_a_usage_error(
    tmp_path: Path, args: list[str], text: str
) -> None:
    # float() reads these; the store refused them later, as an error of its API (exit 1).
    result = invoke([*args, text, "--store", str(tmp_path / "h.db")])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {args[1]}: {text!r} is not a time" in result.stderr


def test_validate_of_a_python_file_says_what_validate_checks(tmp_path: Path) -> None:
    # It advised "write 'flows.py:graph'", which validate's PATH then refused as no file.
    flows = tmp_path / "flows.py"
    flows.write_text("graph = None\n")
    result = invoke(["validate", str(flows)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{flows}: not a YAML manifest (*.yaml, *.yml); validate checks manifests, or a "
        f"folder of them or of agent specs. To check that a graph in Python loads, draw it: "
        f"nodestep draw {flows}:NAME",
        f"{flows}: 1 problem(s)",
    ]


def test_run_of_a_completed_thread_without_input_says_to_give_input(store_url: str) -> None:
    # The engine's ResumeError spoke of invoke(None) and "pass input", not of --input.
    write_blog_thread(store_url, answer="publish")
    result = invoke(["run", "blog:graph", "--thread", "blog-1", "--store", store_url])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "nodestep run: thread 'blog-1' has nothing to continue: its last run completed; "
        "give --input with the fields of a new turn (--input '{}' for none)"
    )


def test_a_command_a_message_suggests_quotes_the_thread_id(store_url: str) -> None:
    # Pasted as printed, `nodestep show my thread` would name the thread "my".
    write_blog_thread(store_url, "my thread")
    store = ["--store", store_url]
    made = invoke(["fork", "my thread", "--at", "1", "--branch", "b", *store])
    assert made.exit_code == 0, made.output
    assert "see it: nodestep show 'my thread' --branch b" in made.stdout
    unknown = invoke(["show", "my thread", "--at", "no-such-event", *store])
    assert "take an event id (or a sequence number) from `nodestep history 'my thread'`" in (
        unknown.stderr
    )


def test_prune_keep_last_zero_is_a_usage_error(tmp_path: Path) -> None:
    # prune refuses keep_last=0 (a branch keeps its last record); the option took 0 and
    # the command failed later with the API's message, exit code 1.
    result = invoke(["prune", "--keep-last", "0", "--store", str(tmp_path / "h.db")])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--keep-last': 0 is not in the range x>=1." in result.stderr


@pytest.mark.slow
def test_serve_on_a_port_in_use_exits_1_saying_what_to_do(tmp_path: Path) -> None:
    # uvicorn logs why and exits with its own code 3, none of the command line's codes.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        store = f"sqlite://{tmp_path}/h.db"
        result = invoke(["serve", "blog:graph", "--port", port, "--store", store])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().endswith(
        f"nodestep serve: the server did not start on 127.0.0.1:{port} (the line above says "
        f"why; a port in use: choose another --port, or stop what listens there)"
    )


FAILING = """
from nodestep import END, START, BaseState, Graph, node

class S(BaseState):
    n: int = 0

@node
def boom(state: S) -> dict:
    raise ValueError("no\\nluck")

graph = Graph(S, name="failing").flow(START >> boom, boom >> END)
"""


def test_run_that_a_node_fails_names_the_node_and_how_to_try_again(tmp_path: Path) -> None:
    # It printed the node's own exception alone: "nodestep run: ValueError: no luck".
    module = tmp_path / "failing.py"
    module.write_text(FAILING)
    store = f"sqlite://{tmp_path}/h.db"
    for _ in range(2):  # the second run tries the failed node again, and says so again
        kept = invoke(["run", f"{module}:graph", "--thread", "t 1", "--store", store])
        assert kept.exit_code == 1
        assert kept.stderr.strip() == (
            "nodestep run: node 'boom' failed: ValueError: no luck; fix it, then run again "
            "with --thread 't 1' to try the node again"
        )
    in_memory = invoke(["run", f"{module}:graph", "--thread", "t"])
    assert in_memory.stderr.strip().endswith(
        "failed: ValueError: no luck; give --store to keep the failed thread and try it again"
    )
