"""``export``, ``import`` and ``prune`` in this process: the file forms and their errors."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import invoke, write_blog_thread


def test_an_export_imports_into_a_store_of_another_kind(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/a.db", answer="publish")
    out = tmp_path / "blog-1.jsonl"
    assert (
        invoke(
            ["export", "blog-1", "--store", str(tmp_path / "a.db"), "-o", str(out), "--quiet"]
        ).exit_code
        == 0
    )
    done = invoke(["import", str(out), "--store", str(tmp_path / "b.jsonl"), "--json"])
    assert done.exit_code == 0
    assert json.loads(done.stdout)["thread_id"] == "blog-1"
    before = invoke(["history", "blog-1", "--store", str(tmp_path / "a.db"), "--json"]).stdout
    after = invoke(["history", "blog-1", "--store", str(tmp_path / "b.jsonl"), "--json"]).stdout
    assert json.loads(before) == json.loads(after)


def test_an_export_as_a_json_array_imports_too(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/a.db")
    lines = invoke(["export", "blog-1", "--store", str(tmp_path / "a.db")]).stdout.splitlines()
    (tmp_path / "blog.json").write_text(json.dumps([json.loads(line) for line in lines]))
    done = invoke(["import", str(tmp_path / "blog.json"), "--store", str(tmp_path / "b.db")])
    assert done.exit_code == 0 and f"{len(lines)} records" in done.stdout


def test_a_line_that_is_not_json_is_named_by_its_number(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"type": "checkpoint"}\nnot json\n')
    done = invoke(["import", str(tmp_path / "bad.jsonl"), "--store", str(tmp_path / "b.db")])
    assert done.exit_code == 1
    assert f"{tmp_path / 'bad.jsonl'}:2: not a JSON record" in done.stderr


def test_an_import_into_a_store_that_has_the_thread_is_refused(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/a.db")
    out = tmp_path / "blog-1.jsonl"
    invoke(["export", "blog-1", "--store", str(tmp_path / "a.db"), "-o", str(out)])
    again = invoke(["import", str(out), "--store", str(tmp_path / "a.db")])
    assert again.exit_code == 1 and "already has records of it" in again.stderr


def test_prune_needs_a_rule(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/a.db")
    done = invoke(["prune", "--store", str(tmp_path / "a.db")])
    assert done.exit_code == 2 and "give --keep-last N, --older-than TIME, or both" in done.stderr


def test_prune_of_one_thread_by_age(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/a.db")
    done = invoke(
        [
            "prune",
            "blog-1",
            "--older-than",
            "2000-01-01",
            "--store",
            str(tmp_path / "a.db"),
            "--json",
        ]
    )
    assert done.exit_code == 0 and json.loads(done.stdout) == {"threads": 1, "dropped": 0}


def test_export_of_an_unknown_thread_is_one_line(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/a.db")
    done = invoke(["export", "nope", "--store", str(tmp_path / "a.db")])
    assert done.exit_code == 1 and "Cannot export thread 'nope'" in done.stderr


def test_prune_of_an_unknown_thread_is_an_error_not_a_success(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path / 'a.db'}", "blog-1")
    done = invoke(["prune", "nobody", "--keep-last", "1", "--store", str(tmp_path / "a.db")])
    assert done.exit_code == 1
    assert "thread 'nobody' has no records; nothing was pruned" in done.stderr


def test_a_pruned_thread_exports_and_imports_with_the_same_history(tmp_path: Path) -> None:
    import anyio

    from nodestep import FilesystemStateStore
    from store_helpers import poll_graph

    source = FilesystemStateStore(tmp_path / "a.jsonl")
    graph = poll_graph(source)
    for i in range(40):
        graph.invoke({"votes": [f"v{i}"]}, thread_id="poll")
    anyio.run(source.aclose)
    where = ["--store", f"file:{tmp_path / 'a.jsonl'}", "--quiet"]
    assert invoke(["prune", "poll", "--keep-last", "20", *where]).exit_code == 0
    out = tmp_path / "poll.jsonl"
    assert invoke(["export", "poll", *where, "-o", str(out)]).exit_code == 0
    done = invoke(["import", str(out), "--store", f"sqlite:{tmp_path / 'b.db'}", "--quiet"])
    assert done.exit_code == 0, done.stderr
    before = invoke(["history", "poll", "--store", str(tmp_path / "a.jsonl"), "--json"]).stdout
    after = invoke(["history", "poll", "--store", str(tmp_path / "b.db"), "--json"]).stdout
    assert json.loads(before) == json.loads(after)
    assert json.loads(after)[0]["seq"] > 1  # the pruned history, as it was
