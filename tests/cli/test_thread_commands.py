"""Reading and managing stored threads from the command line, on every store kind."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from cli_helpers import invoke, write_blog_thread


def _json(args: list[str]) -> object:
    result = invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_threads_lists_each_thread_with_its_status(store_url: str) -> None:
    write_blog_thread(store_url, "paused-1")
    write_blog_thread(store_url, "done-1", answer="publish")
    listed = _json(["threads", "--store", store_url])
    assert isinstance(listed, dict)
    assert {t["thread_id"]: t["status"] for t in listed["threads"]} == {
        "paused-1": "paused",
        "done-1": "completed",
    }
    table = invoke(["threads", "--store", store_url]).stdout
    assert "paused-1" in table and "completed" in table


def test_threads_filters_by_status_and_pages_with_the_printed_cursor(store_url: str) -> None:
    for name in ("a", "b", "c"):
        write_blog_thread(store_url, name, answer="ok")
    write_blog_thread(store_url, "waiting")
    done = _json(["threads", "--store", store_url, "--status", "completed"])
    assert isinstance(done, dict) and len(done["threads"]) == 3
    first = _json(["threads", "--store", store_url, "--limit", "2"])
    assert isinstance(first, dict) and len(first["threads"]) == 2 and first["next_cursor"]
    table = invoke(["threads", "--store", store_url, "--limit", "2"]).stdout
    assert f"--cursor {first['next_cursor']}" in table
    rest = _json(
        ["threads", "--store", store_url, "--limit", "2", "--cursor", first["next_cursor"]]
    )
    assert isinstance(rest, dict) and rest["next_cursor"] is None
    seen = [t["thread_id"] for t in first["threads"] + rest["threads"]]
    assert sorted(seen) == ["a", "b", "c", "waiting"]


def test_threads_filters_by_last_activity(store_url: str) -> None:
    write_blog_thread(store_url)
    assert _json(["threads", "--store", store_url, "--updated-after", "2999-01-01"]) == {
        "threads": [],
        "next_cursor": None,
    }
    old = _json(["threads", "--store", store_url, "--updated-after", "2000-01-01T00:00:00"])
    assert isinstance(old, dict) and len(old["threads"]) == 1


def test_a_time_that_is_not_a_time_is_a_usage_error(store_url: str) -> None:
    result = invoke(["threads", "--store", store_url, "--updated-after", "yesterday"])
    assert result.exit_code == 2
    assert "'yesterday' is not a time; write ISO 8601" in result.stderr


def test_history_lists_every_event_as_a_table_and_as_records(store_url: str) -> None:
    write_blog_thread(store_url)
    records = _json(["history", "blog-1", "--store", store_url])
    assert isinstance(records, list)
    assert [r["type"] for r in records] == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "task_finished",
        "task_finished",
        "superstep_completed",
        "run_paused",
    ]
    table = invoke(["history", "blog-1", "--store", store_url]).stdout
    assert 'drafts=["a post on tea"]' in table
    assert "paused: review:verdict" in table
    assert f" {records[-1]['id'][:8]} " in table  # the short id --at takes


def test_show_gives_the_status_and_the_pending_interrupt(store_url: str) -> None:
    write_blog_thread(store_url)
    shown = _json(["show", "blog-1", "--store", store_url, "--graph", "blog:graph"])
    assert isinstance(shown, dict)
    assert shown["status"] == "paused"
    assert shown["state"] == {
        "topic": "food",
        "drafts": ["a post on tea", "a post on cake"],
        "verdict": "",
    }
    assert [i["key"] for i in shown["interrupts"]] == ["review:verdict"]
    table = invoke(["show", "blog-1", "--store", store_url, "--graph", "blog:graph"]).stdout
    assert "waiting: review:verdict (node review)" in table


def test_show_without_the_graph_gives_the_last_checkpoint_and_says_so(store_url: str) -> None:
    write_blog_thread(store_url)
    shown = _json(["show", "blog-1", "--store", store_url, "--at", "4"])
    assert isinstance(shown, dict)
    assert shown["state"] == {"topic": "", "drafts": [], "verdict": ""}
    assert (shown["state_at"], shown["events_after_state"], shown["status"]) == (1, 3, "unfinished")
    text = invoke(["show", "blog-1", "--store", store_url, "--at", "4"]).stdout
    assert "3 later event(s) change it: pass --graph MODULE:GRAPH" in text


def test_show_at_an_event_id_finds_its_branch(store_url: str) -> None:
    write_blog_thread(store_url)
    records = _json(["history", "blog-1", "--store", store_url])
    assert isinstance(records, list)
    shown = _json(
        ["show", "blog-1", "--store", store_url, "--at", records[5]["id"], "--graph", "blog:graph"]
    )
    assert isinstance(shown, dict)
    assert (shown["sequence"], shown["state"]["drafts"]) == (6, ["a post on tea", "a post on cake"])


def test_an_event_is_found_by_the_short_id_history_prints(store_url: str) -> None:
    write_blog_thread(store_url)
    records = _json(["history", "blog-1", "--store", store_url])
    assert isinstance(records, list)
    shown = _json(["show", "blog-1", "--store", store_url, "--at", records[6]["id"][:8]])
    assert isinstance(shown, dict) and shown["sequence"] == 7


def test_a_short_id_of_digits_only_is_found_when_no_sequence_number_is_it(tmp_path: Path) -> None:
    # About one event id in 40 begins with eight decimal digits: history's short id is then
    # all digits, and must still name the event (a CI run met "03704185").
    from itertools import count

    from blog import Review, plan, review, write

    from nodestep import END, START, Graph, open_store

    numbers = count(1)
    digits = Graph(
        Review, name="blog", id_factory=lambda: f"{next(numbers) + 10_000_000}-0000-4000-8000-0"
    ).flow(START >> plan, write >> review, review >> END)
    url = f"sqlite://{tmp_path / 'digits.db'}"

    async def work() -> None:
        store = open_store(url)
        try:
            await digits.ainvoke({"topic": "food"}, thread_id="blog-1", state_store=store)
        finally:
            await store.aclose()

    anyio.run(work)
    records = _json(["history", "blog-1", "--store", url])
    assert isinstance(records, list)
    short = records[-1]["id"][:8]
    assert short.isdigit() and int(short) > records[-1]["seq"]
    shown = _json(["show", "blog-1", "--store", url, "--at", short])
    assert isinstance(shown, dict) and shown["sequence"] == records[-1]["seq"]
    by_number = _json(["show", "blog-1", "--store", url, "--at", "2"])
    assert isinstance(by_number, dict) and by_number["sequence"] == 2


def test_fork_with_the_graph_starts_a_branch_that_show_and_branches_read(store_url: str) -> None:
    write_blog_thread(store_url, answer="publish")
    made = _json(
        [
            "fork",
            "blog-1",
            "--at",
            "7",
            "--branch",
            "retry",
            "--store",
            store_url,
            "--graph",
            "blog:graph",
        ]
    )
    assert isinstance(made, dict)
    assert (made["branch"], made["parent"], made["from_seq"]) == ("retry", "main", 7)
    listed = _json(["branches", "blog-1", "--store", store_url])
    assert isinstance(listed, list) and [b["branch"] for b in listed] == ["retry"]
    shown = _json(["show", "blog-1", "--branch", "retry", "--store", store_url])
    assert isinstance(shown, dict)
    assert shown["status"] == "paused" and shown["state"]["verdict"] == ""
    assert shown["state"]["drafts"] == ["a post on tea", "a post on cake"]
    main = _json(["show", "blog-1", "--store", store_url, "--graph", "blog:graph"])
    assert isinstance(main, dict) and main["state"]["verdict"] == "publish"


def test_fork_without_the_graph_copies_a_checkpoint(store_url: str) -> None:
    write_blog_thread(store_url)
    made = _json(["fork", "blog-1", "--at", "1", "--store", store_url])
    assert isinstance(made, dict) and made["from_seq"] == 1 and made["branch"] != "main"
    records = _json(["history", "blog-1", "--branch", made["branch"], "--store", store_url])
    assert isinstance(records, list) and len(records) == 1
    assert records[0]["type"] == "checkpoint" and records[0]["seq"] == 2


def test_fork_without_the_graph_elsewhere_asks_for_it(store_url: str) -> None:
    write_blog_thread(store_url)
    result = invoke(["fork", "blog-1", "--at", "4", "--store", store_url])
    assert result.exit_code == 1
    assert "is a task_finished, not a checkpoint: give --graph MODULE:GRAPH" in result.stderr


def test_a_taken_branch_name_is_refused(store_url: str) -> None:
    write_blog_thread(store_url)
    assert (
        invoke(["fork", "blog-1", "--at", "1", "--branch", "b", "--store", store_url]).exit_code
        == 0
    )
    again = invoke(["fork", "blog-1", "--at", "1", "--branch", "b", "--store", store_url])
    assert again.exit_code == 1 and "already has a branch 'b'" in again.stderr


def test_delete_removes_every_record_of_the_thread(store_url: str) -> None:
    write_blog_thread(store_url)
    assert invoke(["delete", "blog-1", "--yes", "--store", store_url]).exit_code == 0
    gone = invoke(["history", "blog-1", "--store", store_url])
    assert gone.exit_code == 1 and "thread 'blog-1' has no history" in gone.stderr


def test_delete_asks_first_and_stops_on_no(store_url: str) -> None:
    write_blog_thread(store_url)
    result = invoke(["delete", "blog-1", "--store", store_url], input="n\n")
    assert result.exit_code == 1  # click's Abort
    assert invoke(["history", "blog-1", "--store", store_url]).exit_code == 0


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("no-such-event", "thread 'blog-1' has no event 'no-such-event'"),
        (
            "99",
            "has no event 99: its sequence numbers run from 1 to 7",
        ),
    ],
)
def test_an_unknown_event_is_one_line_naming_it(store_url: str, at: str, says: str) -> None:
    write_blog_thread(store_url)
    result = invoke(["show", "blog-1", "--at", at, "--store", store_url])
    assert result.exit_code == 1
    assert says in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_unknown_thread_is_an_error_of_its_command(store_url: str) -> None:
    write_blog_thread(store_url, "another")
    result = invoke(["branches", "nope", "--store", store_url])
    assert result.exit_code == 1
    assert result.stderr.startswith("nodestep branches: thread 'nope' has no history")


def test_no_store_is_a_usage_error() -> None:
    result = invoke(["threads"])
    assert result.exit_code == 2 and "give the store: --store URL" in result.stderr


def test_a_memory_store_is_refused_where_it_would_be_empty() -> None:
    result = invoke(["history", "t", "--store", "memory:"])
    assert result.exit_code == 2 and "a new, empty store in each process" in result.stderr


def test_an_unknown_scheme_names_the_known_ones() -> None:
    result = invoke(["threads", "--store", "mysql://x/y"])
    assert result.exit_code == 1
    assert "unknown scheme 'mysql:'" in result.stderr and "'sqlite:'" in result.stderr


def test_a_bare_path_is_a_file_store_or_a_sqlite_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_blog_thread(f"file://{tmp_path}/h.jsonl", "in-file")
    write_blog_thread(f"sqlite://{tmp_path}/h.db", "in-sqlite")
    assert "in-file" in invoke(["threads", "--store", str(tmp_path / "h.jsonl")]).stdout
    assert "in-sqlite" in invoke(["threads", "--store", str(tmp_path / "h.db")]).stdout


def test_the_store_comes_from_the_environment(store_url: str) -> None:
    from click.testing import CliRunner

    from nodestep.cli._app import cli

    write_blog_thread(store_url)
    result = CliRunner().invoke(cli, ["threads", "--json"], env={"NODESTEP_STORE": store_url})
    assert result.exit_code == 0 and "blog-1" in result.stdout


def test_debug_lets_the_error_through_with_its_traceback() -> None:
    result = invoke(["threads", "--store", "mysql://x/y", "--debug"])
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "GraphConfigError"


def test_every_command_reads_a_postgresql_store(postgres_url: str) -> None:
    write_blog_thread(postgres_url, answer="publish")
    listed = _json(["threads", "--store", postgres_url])
    assert isinstance(listed, dict) and listed["threads"][0]["status"] == "completed"
    made = _json(
        [
            "fork",
            "blog-1",
            "--at",
            "7",
            "--branch",
            "again",
            "--store",
            postgres_url,
            "--graph",
            "blog:graph",
        ]
    )
    assert isinstance(made, dict) and made["branch"] == "again"
    shown = _json(
        ["show", "blog-1", "--branch", "again", "--store", postgres_url, "--graph", "blog:graph"]
    )
    assert isinstance(shown, dict) and shown["status"] == "paused"
    assert invoke(["delete", "blog-1", "--yes", "--store", postgres_url]).exit_code == 0
    assert _json(["threads", "--store", postgres_url]) == {"threads": [], "next_cursor": None}


@pytest.mark.parametrize("kind", ["bare", "file", "sqlite"])
def test_a_store_path_that_does_not_exist_is_an_error_not_a_new_store(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / ("typo.db" if kind != "file" else "typo.jsonl")
    url = {"bare": str(path), "file": f"file://{path}", "sqlite": f"sqlite://{path}"}[kind]
    result = invoke(["threads", "--store", url])
    assert result.exit_code == 1 and f"no store at '{path}'" in result.stderr
    assert not path.exists()


@pytest.mark.parametrize("with_graph", [False, True])
def test_show_names_the_failure_a_thread_stands_at(store_url: str, with_graph: bool) -> None:
    ran = invoke(["run", "blog:job", "--thread", "j", "--store", store_url, "--quiet"])
    assert ran.exit_code == 1 and "ConnectionError: the service did not answer" in ran.stderr
    graph = ["--graph", "blog:job"] if with_graph else []
    shown = _json(["show", "j", "--store", store_url, *graph])
    assert isinstance(shown, dict) and shown["status"] == "unfinished"
    assert shown["error"] == {
        "error": "ConnectionError",
        "message": "the service did not answer",
        "node": "flaky",
    }
    text = invoke(["show", "j", "--store", store_url, *graph]).stdout
    assert "failed in node flaky: ConnectionError: the service did not answer" in text


def test_show_without_the_graph_names_the_failure_of_a_fork_where_a_run_failed(
    store_url: str,
) -> None:
    assert invoke(["run", "blog:job", "--thread", "j", "--store", store_url, "--quiet"]).exit_code
    records = _json(["history", "j", "--store", store_url])
    assert isinstance(records, list)
    failed = next(r for r in records if r["type"] == "run_failed")
    fork = ["fork", "j", "--at", str(failed["seq"]), "--branch", "again", "--graph", "blog:job"]
    assert invoke([*fork, "--store", store_url]).exit_code == 0
    # The branch holds no run_failed: its opening checkpoint holds the failure.
    shown = _json(["show", "j", "--branch", "again", "--store", store_url])
    assert isinstance(shown, dict)
    assert shown["error"] == {
        "error": "ConnectionError",
        "message": "the service did not answer",
        "node": "flaky",
    }


def test_an_event_before_a_forks_opening_is_said_to_be_on_its_parent(store_url: str) -> None:
    write_blog_thread(store_url)
    made = _json(["fork", "blog-1", "--at", "1", "--branch", "b", "--store", store_url])
    assert isinstance(made, dict)
    result = invoke(["show", "blog-1", "--at", "1", "--branch", "b", "--store", store_url])
    assert result.exit_code == 1
    assert "forked from branch 'main' after event 1: give --branch main" in result.stderr
    assert "pruned" not in result.stderr


def test_fork_without_the_graph_at_a_migration_opens_as_a_fork(store_url: str) -> None:
    from blog import Review, graph

    async def migrated() -> None:
        from nodestep import Resume, open_store

        store = open_store(store_url)
        try:
            await graph.ainvoke({"topic": "food"}, thread_id="m", state_store=store)
            await graph.ainvoke(None, thread_id="m", resume=Resume("publish"), state_store=store)
            await graph.migrate("m", lambda values: values, from_state=Review, state_store=store)
        finally:
            await store.aclose()

    anyio.run(migrated)
    records = _json(["history", "m", "--store", store_url])
    assert isinstance(records, list)
    mark = next(r for r in records if "migration" in r)
    made = _json(["fork", "m", "--at", str(mark["seq"]), "--branch", "b", "--store", store_url])
    assert isinstance(made, dict)
    opening = _json(["history", "m", "--branch", "b", "--store", store_url])
    assert isinstance(opening, list) and "migration" not in opening[0]
    diff = _json(["diff", "m", "main", "b", "--store", store_url])
    assert isinstance(diff, dict) and diff["fork_point"] is not None
