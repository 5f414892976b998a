"""``diff`` and ``provenance`` from the command line, over nodestep.history."""

from __future__ import annotations

import json

import anyio
from cli_helpers import invoke, write_blog_thread

from nodestep import Resume, open_store


def _forked(url: str) -> None:
    """blog-1 answered "publish" on main, and "reject" on branch retry forked at the pause."""
    from blog import graph

    write_blog_thread(url, answer="publish")

    async def work() -> None:
        store = open_store(url)
        try:
            history = await graph.history("blog-1", state_store=store)
            pause = history.events[6].id
            await graph.fork("blog-1", from_=pause, name="retry", state_store=store)
            await graph.ainvoke(
                None,
                thread_id="blog-1",
                branch_id="retry",
                resume=Resume("reject"),
                state_store=store,
            )
        finally:
            await store.aclose()

    anyio.run(work)


def _json(args: list[str]) -> dict:  # type: ignore[type-arg]
    result = invoke([*args, "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert isinstance(found, dict)
    return found


def test_diff_of_two_branches_gives_the_fork_point_fields_and_events(store_url: str) -> None:
    _forked(store_url)
    found = _json(["diff", "blog-1", "main", "retry", "--store", store_url])
    assert found["fork_point"]["sequence"] == 7
    assert [c["field"] for c in found["changes"]] == ["verdict"]
    assert [e["type"] for e in found["b_events"]] == [
        "run_started",
        "superstep_completed",
        "run_completed",
    ]
    text = invoke(["diff", "blog-1", "main", "retry", "--store", store_url]).stdout
    assert 'verdict: "publish" -> "reject"' in text and "fork point: main@7" in text


def test_diff_takes_events_by_their_short_ids_and_the_graph(store_url: str) -> None:
    _forked(store_url)
    events = json.loads(invoke(["history", "blog-1", "--store", store_url, "--json"]).stdout)
    found = _json(
        [
            "diff",
            "blog-1",
            events[5]["id"][:8],
            "retry",
            "--store",
            store_url,
            "--graph",
            "blog:graph",
        ]
    )
    assert found["a"]["sequence"] == 6 and found["fork_point"]["sequence"] == 6
    assert [c["field"] for c in found["changes"]] == ["verdict"]


def test_a_branch_against_itself_is_the_same(store_url: str) -> None:
    _forked(store_url)
    found = _json(["diff", "blog-1", "retry", "retry", "--store", store_url])
    assert found["changes"] == [] and found["a_events"] == [] and found["b_events"] == []


def test_provenance_names_each_write_of_a_reducer_field(store_url: str) -> None:
    _forked(store_url)
    found = _json(["provenance", "blog-1", "drafts", "--store", store_url])
    assert found["reducer"] is True and found["value"] == ["a post on tea", "a post on cake"]
    # The two write tasks finish in either order; their writes merge in task order.
    assert sorted(w["sequence"] for w in found["writes"]) == [4, 5]
    assert [w["value"] for w in found["writes"]] == [["a post on tea"], ["a post on cake"]]
    text = invoke(["provenance", "blog-1", "drafts", "--store", store_url]).stdout
    assert "a reducer field; 2 write(s)" in text


def test_provenance_on_a_branch_and_at_an_event(store_url: str) -> None:
    _forked(store_url)
    on_branch = _json(
        ["provenance", "blog-1", "verdict", "--branch", "retry", "--store", store_url]
    )
    assert on_branch["value"] == "reject" and on_branch["branch_id"] == "retry"
    before = _json(["provenance", "blog-1", "verdict", "--at", "7", "--store", store_url])
    assert before["value"] == "" and before["sequence"] == 7


def test_an_unknown_field_or_branch_is_one_line(store_url: str) -> None:
    _forked(store_url)
    field = invoke(["provenance", "blog-1", "nope", "--store", store_url])
    assert field.exit_code == 1 and "'nope'" in field.stderr
    assert len(field.stderr.strip().splitlines()) == 1
    side = invoke(["diff", "blog-1", "main", "nowhere", "--store", store_url])
    assert side.exit_code == 1 and "'nowhere'" in side.stderr
    assert len(side.stderr.strip().splitlines()) == 1
