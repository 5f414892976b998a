"""FolderWorkspace: the workspace operations on a real folder, with symlink escapes refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import GraphConfigError, WorkspaceError
from nodestep.agents import (
    FolderWorkspace,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    Workspace,
    create_react_agent,
    workspace_tools,
)

pytestmark = pytest.mark.anyio


def test_the_operations_read_and_write_the_files_of_the_folder(tmp_path: Path) -> None:
    space = FolderWorkspace(tmp_path)
    space.write("notes/todo.md", "- ship docs\n- fix bug\n")
    assert (tmp_path / "notes" / "todo.md").read_text() == "- ship docs\n- fix bug\n"
    assert space.edit("notes/todo.md", "fix bug", "fix the login bug") == 1
    (tmp_path / "top.txt").write_text("from outside")
    assert space.read("top.txt") == "from outside"
    assert space.list() == ["notes/", "top.txt"]
    assert space.glob("**/*.md") == ["notes/todo.md"]
    space.delete("top.txt")
    assert not (tmp_path / "top.txt").exists()
    assert space.changes == {}  # used by hand, it writes at once


def test_deleting_the_last_file_of_a_folder_removes_the_folder(tmp_path: Path) -> None:
    space = FolderWorkspace(tmp_path)
    space.write("a/b/c.md", "c")
    space.write("a/keep.md", "k")
    space.delete("a/b/c.md")
    assert not (tmp_path / "a" / "b").exists() and (tmp_path / "a").is_dir()
    space.write("a/b", "now a file")
    assert space.list("a") == ["b", "keep.md"]


def test_a_write_replaces_the_file_whole_and_keeps_line_ends(tmp_path: Path) -> None:
    space = FolderWorkspace(tmp_path)
    space.write("a.txt", "one\r\ntwo\n")
    space.write("a.txt", "three\r\n")
    assert (tmp_path / "a.txt").read_bytes() == b"three\r\n"
    assert space.read("a.txt") == "three\r\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # nothing left aside


def test_the_path_rules_are_those_of_every_workspace(tmp_path: Path) -> None:
    space = FolderWorkspace(tmp_path / "inner", create=True)
    (tmp_path / "secret.txt").write_text("s")
    for path in ["../secret.txt", "/etc/passwd", "a\\..\\..\\secret.txt"]:
        with pytest.raises(WorkspaceError, match=r"is not allowed in the workspace") as caught:
            space.read(path)
        assert caught.value.rule == "path"


def test_a_symlink_that_leads_outside_is_refused_for_reading_and_writing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "away").symlink_to(outside, target_is_directory=True)
    space = FolderWorkspace(root)
    for path in ["link.txt", "away/secret.txt", "away/new.txt"]:
        with pytest.raises(WorkspaceError, match=r"a symlink on it leads outside") as caught:
            space.write(path, "overwritten")
        assert caught.value.rule == "path" and caught.value.path == path
    with pytest.raises(WorkspaceError, match=r"leads outside"):
        space.read("away/secret.txt")
    assert (outside / "secret.txt").read_text() == "s"
    assert not (outside / "new.txt").exists()
    assert space.list() == [] and space.glob("**") == []


def test_a_symlink_that_stays_inside_works(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("real")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real.md")
    space = FolderWorkspace(tmp_path)
    assert space.read("alias.md") == "real"
    assert space.glob("*.md") == ["alias.md", "real.md"]


def test_the_size_limits_count_the_files_on_disk(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 90)
    space = FolderWorkspace(tmp_path, max_total_bytes=100, max_file_bytes=50)
    with pytest.raises(WorkspaceError, match=r"would hold 101 bytes, more than its max_total"):
        space.write("more.txt", "y" * 11)
    with pytest.raises(WorkspaceError, match=r"51 bytes is more than a file may hold"):
        space.write("b.txt", "y" * 51)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]


def test_a_file_that_is_no_utf8_text_is_named_when_read(tmp_path: Path) -> None:
    (tmp_path / "image.png").write_bytes(b"\x89PNG\xff")
    with pytest.raises(WorkspaceError, match=r"'image.png': it is not UTF-8 text") as caught:
        FolderWorkspace(tmp_path).read("image.png")
    assert caught.value.rule == "type"


def test_a_root_that_is_missing_or_a_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match=r"is not there; give a folder, or pass create=True"):
        FolderWorkspace(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(GraphConfigError, match=r"is a file"):
        FolderWorkspace(tmp_path / "file")
    assert FolderWorkspace(tmp_path / "made", create=True).root == (tmp_path / "made").resolve()


def test_a_name_longer_than_the_disk_allows_is_refused_without_the_root(tmp_path: Path) -> None:
    space = FolderWorkspace(tmp_path)
    for path, size in [("notes/" + "n" * 300 + ".md", 303), ("é" * 123, 246)]:
        for op in (space.read, space.exists, lambda p: space.write(p, "x")):
            with pytest.raises(WorkspaceError) as caught:
                op(path)
            assert caught.value.rule == "path"
            assert (
                f"is {size} bytes long, and a file or folder name in the folder holds at most 245"
                in str(caught.value)
            )
            assert str(tmp_path) not in str(caught.value)
    space.write("n" * 245, "x")  # the longest name that fits
    assert space.read("n" * 245) == "x"


async def test_a_long_name_reaches_the_model_as_a_refusal_naming_the_rule(tmp_path: Path) -> None:
    path = "n" * 300 + ".md"
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("write_file", {"path": path, "content": "R"})]), "ok"]
    )
    agent = create_react_agent(
        model, workspace_tools(), state=MessagesState, workspace=FolderWorkspace(tmp_path)
    )
    message = (await agent.ainvoke({"messages": "go"})).state.messages[2]
    assert message.status == "error"
    assert message.content.startswith(f"Error: Path {path!r} is not allowed in the workspace")
    assert str(tmp_path) not in message.content and "OSError" not in message.content


async def test_an_agent_with_a_folder_workspace_needs_no_state_field(tmp_path: Path) -> None:
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("write_file", {"path": "out/r.md", "content": "R"})]), "ok"]
    )
    agent = create_react_agent(
        model, workspace_tools(), state=MessagesState, workspace=FolderWorkspace(tmp_path)
    )
    result = await agent.ainvoke({"messages": "go"})
    assert (tmp_path / "out" / "r.md").read_text() == "R"
    assert result.state.messages[2].content == "Wrote out/r.md."


SEGMENT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\\x00"),
    min_size=1,
    max_size=6,
)


@settings(max_examples=50, deadline=None)
@given(path=st.lists(st.one_of(SEGMENT, st.sampled_from([".", "..", ""])), max_size=5))
def test_any_path_a_folder_workspace_takes_stays_inside_its_root(
    tmp_path_factory: pytest.TempPathFactory, path: list[str]
) -> None:
    around = tmp_path_factory.mktemp("around")
    root = around / "root"
    space = FolderWorkspace(root, create=True)
    written = "/".join(path)
    try:
        space.write(written, "x")
    except WorkspaceError as error:
        assert error.rule in ("path", "folder")
        return
    except OSError:
        return  # a name the file system refuses (too long): nothing was written outside
    for here, _, names in os.walk(around):
        for name in names:
            assert Path(here, name).resolve().is_relative_to(root.resolve())


_op = st.tuples(
    st.sampled_from(["write", "edit", "delete", "read", "list", "glob"]),
    st.sampled_from(["a.md", "d/b.md", "d", "d/e/c.md", "../x", "d/b.md/z"]),
    st.sampled_from(["x", "xx", "y"]),
)


def _apply(space: Workspace, op: tuple[str, str, str]) -> object:
    kind, path, text = op
    try:
        if kind == "write":
            return space.write(path, text)
        if kind == "edit":
            return space.edit(path, "x", text)
        if kind == "delete":
            return space.delete(path)
        if kind == "read":
            return space.read(path)
        if kind == "list":
            return space.list(path.rpartition("/")[0])
        return space.glob(f"**/{path.rpartition('/')[2]}")
    except WorkspaceError as error:
        return ("refused", error.rule)


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(_op, max_size=12))
def test_a_folder_answers_every_call_as_a_workspace_in_the_state_does(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, str]]
) -> None:
    folder = FolderWorkspace(tmp_path_factory.mktemp("same"))
    state = Workspace()
    for op in ops:
        assert _apply(folder, op) == _apply(state, op), op
    assert folder.glob("**") == state.glob("**")
    assert {p: folder.read(p) for p in folder.glob("**")} == {
        p: state.read(p) for p in state.glob("**")
    }
