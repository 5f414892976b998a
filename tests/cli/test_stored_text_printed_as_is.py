"""The command line prints stored text as it is: thread ids, branch ids and values are
anyone's text, so Rich markup in them is not a style, and a control character in them does
not reach the terminal."""

from __future__ import annotations

from pathlib import Path

import anyio
from cli_helpers import invoke

from nodestep import open_store
from nodestep.cli import load_target

# A node writes Rich markup, an emoji code and an escape sequence; another asks a question
# that holds markup too. Rich read "[/x]" as a closing tag that closes nothing, and failed.
GRAPH = """
from nodestep import END, START, BaseState, Graph, interrupt, node

class S(BaseState):
    text: str = ""
    ok: str = ""

@node
def first(state: S) -> dict:
    return {"text": "[bold]hi[/] [/x] :smile: <b>&amp;</b> \\x1b[31mred"}

@node
def ask(state: S) -> dict:
    return {"ok": interrupt({"q": "[/q] sure?"}, id="k")}

graph = Graph(S, name="markup").flow(START >> first, first >> ask, ask >> END)
"""

MARKUP_ID = "t[/]1 :smile:"
CONTROL_ID = "evil\x1b[2J\x1b]0;title\x07\r\nfake-row"


def _store_with_threads(tmp_path: Path) -> tuple[str, Path]:
    """A SQLite store with a paused thread under each odd id, and the graph's file."""
    module = tmp_path / "markup_graph.py"
    module.write_text(GRAPH)
    graph = load_target(f"{module}:graph")
    url = f"sqlite://{tmp_path}/h.db"

    async def work() -> None:
        store = open_store(url)
        try:
            for thread in (MARKUP_ID, CONTROL_ID):
                await graph.ainvoke({}, thread_id=thread, state_store=store)  # type: ignore[union-attr]
        finally:
            await store.aclose()

    anyio.run(work)
    return url, module


def test_markup_in_thread_ids_and_values_is_printed_as_is(tmp_path: Path) -> None:
    url, module = _store_with_threads(tmp_path)
    listed = invoke(["threads", "--store", url])
    assert listed.exit_code == 0, listed.output
    assert MARKUP_ID in listed.stdout
    history = invoke(["history", MARKUP_ID, "--store", url])
    assert history.exit_code == 0, history.output
    assert "[/x]" in history.stdout and f"thread {MARKUP_ID}" in history.stdout
    for extra in ([], ["--graph", f"{module}:graph"]):
        shown = invoke(["show", MARKUP_ID, "--store", url, *extra])
        assert shown.exit_code == 0, shown.output
        assert f"thread {MARKUP_ID}, branch main" in shown.stdout
        assert 'asks {"q":"[/q] sure?"}' in shown.stdout
    shown = invoke(["show", MARKUP_ID, "--store", url, "--graph", f"{module}:graph"])
    assert '"[bold]hi[/] [/x] :smile: <b>&amp;</b> \\u001b[31mred"' in shown.stdout


def test_control_characters_in_a_thread_id_show_as_escapes(tmp_path: Path) -> None:
    url, _ = _store_with_threads(tmp_path)
    listed = invoke(["threads", "--store", url])
    assert listed.exit_code == 0, listed.output
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "evil\\x1b[2J\\x1b]0;title\\x07\\r\\nfake-row" in listed.stdout
    history = invoke(["history", CONTROL_ID, "--store", url])
    assert history.exit_code == 0, history.output
    assert "\x1b" not in history.stdout and "\\r\\nfake-row, branch main" in history.stdout


def test_run_and_export_print_markup_as_is(tmp_path: Path) -> None:
    url, module = _store_with_threads(tmp_path)
    ran = invoke(
        ["run", f"{module}:graph", "--thread", "r[/]x", "--store", url], input='"[/z]yes"\n'
    )
    assert ran.exit_code == 0, ran.output
    assert "task first: text=" in ran.stderr and "[/x]" in ran.stderr
    assert "thread r[/]x: completed" in ran.stdout and '"[/z]yes"' in ran.stdout
    exported = invoke(["export", "r[/]x", "--store", url, "-o", str(tmp_path / "r.jsonl")])
    assert exported.exit_code == 0, exported.output
    assert "export r[/]x" in exported.stderr
