"""FolderWorkspace in a tool node: each call works on the folder as the reply found it, and
its changes are saved when it has worked, in call order, as a workspace in the state does."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import InMemoryStateStore, Resume, WorkspaceError, interrupt
from nodestep.agents import (
    FolderWorkspace,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    Workspace,
    WorkspaceState,
    create_react_agent,
    merge_files,
    tool,
    workspace_tools,
)

pytestmark = pytest.mark.anyio


def _files(root: Path) -> dict[str, str]:
    """Return every file under ``root`` (hidden ones too: a file left aside shows)."""
    return {
        path.relative_to(root).as_posix(): path.read_text()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _agent(root: Path, replies: list[ScriptedReply | str], tools: list[Any] | None = None) -> Any:
    return create_react_agent(
        ScriptedModel(replies),
        tools if tools is not None else workspace_tools(),
        state=MessagesState,
        workspace=FolderWorkspace(root),
    )


def _tool_messages(result: Any) -> list[Any]:
    return [m for m in result.state.messages if m.role == "tool"]


# A call that fails.


@tool
def draft_then_fail(path: str, files: Workspace) -> str:
    """Write a draft, edit another file, then fail.

    Args:
        path: Where to write the draft.
    """
    files.write(path, "half-done draft")
    files.edit("keep.md", "old", "new")
    files.delete("gone.md")
    raise RuntimeError("the second step failed")


async def test_a_call_that_fails_after_writing_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "keep.md").write_text("old text")
    (tmp_path / "gone.md").write_text("still here")
    reply = ScriptedReply(tool_calls=[("draft_then_fail", {"path": "drafts/d.md"})])
    result = await _agent(tmp_path, [reply, "Sorry."], [draft_then_fail]).ainvoke(
        {"messages": "Draft it."}
    )
    message = result.state.messages[2]
    assert message.status == "error"
    assert message.content == "Error: draft_then_fail raised RuntimeError: the second step failed"
    assert _files(tmp_path) == {"gone.md": "still here", "keep.md": "old text"}
    assert not (tmp_path / "drafts").exists()


async def test_a_refused_call_beside_one_that_worked_saves_only_the_one_that_worked(
    tmp_path: Path,
) -> None:
    calls = [
        ("write_file", {"path": "a.md", "content": "A"}),
        ("edit_file", {"path": "a.md", "old_text": "zz", "new_text": "y"}),
        ("write_file", {"path": "../out.md", "content": "x"}),
    ]
    result = await _agent(tmp_path, [ScriptedReply(tool_calls=calls), "done"]).ainvoke(
        {"messages": "go"}
    )
    assert [m.status for m in _tool_messages(result)] == ["ok", "error", "error"]
    assert _files(tmp_path) == {"a.md": "A"}
    assert not (tmp_path.parent / "out.md").exists()


# Calls of one reply.


async def test_a_call_never_sees_another_calls_write_of_the_same_reply(tmp_path: Path) -> None:
    written = anyio.Event()

    @tool
    async def write_then_signal(path: str, text: str, files: Workspace) -> str:
        """Write a file.

        Args:
            path: The file.
            text: Its text.
        """
        files.write(path, text)
        written.set()
        return "written"

    @tool
    async def peek(path: str, files: Workspace) -> str:
        """Read a file once the other call has written it.

        Args:
            path: The file.
        """
        await written.wait()
        return files.read(path) if files.exists(path) else "(no such file)"

    calls = [
        ("write_then_signal", {"path": "a.txt", "text": "A" * 1000}),
        ("write_then_signal", {"path": "b.txt", "text": "B" * 1000}),
        ("peek", {"path": "a.txt"}),
    ]
    agent = create_react_agent(
        ScriptedModel([ScriptedReply(tool_calls=calls), "ok"]),
        [write_then_signal, peek],
        state=MessagesState,
        workspace=FolderWorkspace(tmp_path, max_total_bytes=1500),
    )
    result = await agent.ainvoke({"messages": "go"})
    contents = [m.content for m in _tool_messages(result)]
    assert contents[0] == "written" and contents[2] == "(no such file)"
    assert contents[1] == (
        "Error: Cannot write 'b.txt': the workspace would hold 2,000 bytes, more than its "
        "max_total_bytes=1,500. Delete files you no longer need, or write less. An earlier "
        "call of the same reply changed the workspace first, so this call changed nothing: "
        "look again, then call it again."
    )
    assert _files(tmp_path) == {"a.txt": "A" * 1000}


async def test_two_calls_writing_one_file_leave_the_later_calls_text_whatever_ends_first(
    tmp_path: Path,
) -> None:
    second_done = anyio.Event()

    @tool
    async def write_when(path: str, text: str, wait: bool, files: Workspace) -> str:
        """Write a file, after the other call when told to wait.

        Args:
            path: The file.
            text: Its text.
            wait: Wait for the other call to finish first.
        """
        if wait:
            await second_done.wait()
        files.write(path, text)
        if not wait:
            second_done.set()
        return "written"

    calls = [
        ("write_when", {"path": "a.md", "text": "first call", "wait": True}),
        ("write_when", {"path": "a.md", "text": "second call", "wait": False}),
    ]
    result = await _agent(tmp_path, [ScriptedReply(tool_calls=calls), "ok"], [write_when]).ainvoke(
        {"messages": "go"}
    )
    assert [m.status for m in _tool_messages(result)] == ["ok", "ok"]
    assert _files(tmp_path) == {"a.md": "second call"}


async def test_a_call_whose_changes_clash_with_an_earlier_calls_changes_nothing(
    tmp_path: Path,
) -> None:
    calls = [
        ("write_file", {"path": "d", "content": "f"}),
        ("write_file", {"path": "d/e.md", "content": "x"}),
        ("list_files", {}),
    ]
    result = await _agent(tmp_path, [ScriptedReply(tool_calls=calls), "done"]).ainvoke(
        {"messages": "go"}
    )
    messages = _tool_messages(result)
    assert [m.status for m in messages] == ["ok", "error", "ok"]
    assert messages[1].content == (
        "Error: Cannot write 'd/e.md': 'd' is a file, so it cannot be a folder. Choose "
        "another path, or delete 'd' first. An earlier call of the same reply changed the "
        "workspace first, so this call changed nothing: look again, then call it again."
    )
    assert messages[2].content == "[]"
    assert _files(tmp_path) == {"d": "f"}


@tool
def write_all(paths: list[str], files: Workspace) -> str:
    """Write each file, in order.

    Args:
        paths: The files.
    """
    for path in paths:
        files.write(path, "t")
    return "written"


async def test_a_refused_calls_changes_never_count_against_a_later_call(tmp_path: Path) -> None:
    calls = [
        ("write_all", {"paths": ["a"]}),
        ("write_all", {"paths": ["x", "a/b"]}),  # 'x' fits, 'a/b' does not: all dropped
        ("write_all", {"paths": ["x/y"]}),  # fits once 'x' is dropped
    ]
    reply = [ScriptedReply(tool_calls=calls), "ok"]
    in_folder = await _agent(tmp_path, reply, [write_all]).ainvoke({"messages": "go"})
    in_state = await create_react_agent(
        ScriptedModel(reply), [write_all], state=WorkspaceState
    ).ainvoke({"messages": "go"})
    for result in (in_folder, in_state):
        assert [m.status for m in _tool_messages(result)] == ["ok", "error", "ok"]
    assert _files(tmp_path) == dict(in_state.state.workspace) == {"a": "t", "x/y": "t"}


async def test_a_move_an_edit_and_a_delete_of_one_call_are_saved_together(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "old.md").write_text("moved text")
    (tmp_path / "todo.md").write_text("- fix bug\n")
    (tmp_path / "trash.md").write_text("t")

    @tool
    def tidy(files: Workspace) -> str:
        """Move a note, edit the list, empty the trash."""
        files.write("archive/old.md", files.read("notes/old.md"))
        files.delete("notes/old.md")
        files.edit("todo.md", "fix bug", "fix the login bug")
        files.delete("trash.md")
        return str(files.list())

    result = await _agent(
        tmp_path, [ScriptedReply(tool_calls=[("tidy", {})]), "ok"], [tidy]
    ).ainvoke({"messages": "go"})
    assert result.state.messages[2].content == "['archive/', 'todo.md']"
    assert _files(tmp_path) == {"archive/old.md": "moved text", "todo.md": "- fix the login bug\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive", "todo.md"]  # notes/ pruned


# A call's view, and saving it by hand.


def test_a_view_holds_its_changes_until_they_are_applied(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("A")
    space = FolderWorkspace(tmp_path)
    view = space.bind(None)
    view.write("notes/b.md", "B")
    view.edit("a.md", "A", "AA")
    assert view.read("a.md") == "AA" and view.list() == ["a.md", "notes/"]
    assert space.read("a.md") == "A" and not (tmp_path / "notes").exists()
    assert view.changes == {"notes/b.md": "B", "a.md": "AA"} and space.changes == {}
    space.apply(view.changes)
    assert _files(tmp_path) == {"a.md": "AA", "notes/b.md": "B"}


def test_a_file_made_and_deleted_by_one_call_is_no_change(tmp_path: Path) -> None:
    view = FolderWorkspace(tmp_path).bind(None)
    view.write("tmp/x.md", "x")
    view.delete("tmp/x.md")
    assert view.changes == {} and view.list() == []


def test_a_folder_emptied_by_a_call_may_become_a_file_and_a_file_a_folder(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.md").write_text("x")
    (tmp_path / "f").write_text("f")
    space = FolderWorkspace(tmp_path)
    view = space.bind(None)
    with pytest.raises(WorkspaceError, match=r"Cannot write 'd': it is a folder"):
        view.write("d", "no")
    view.delete("d/x.md")
    view.write("d", "now a file")
    view.delete("f")
    view.write("f/inside.md", "now a folder")
    assert view.list() == ["d", "f/"]
    space.apply(view.changes)
    assert _files(tmp_path) == {"d": "now a file", "f/inside.md": "now a folder"}


def test_the_size_limit_counts_the_folder_and_the_calls_changes(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 90)
    view = FolderWorkspace(tmp_path, max_total_bytes=100).bind(None)
    view.write("a.txt", "y" * 5)
    with pytest.raises(WorkspaceError, match=r"would hold 101 bytes, more than its max_total"):
        view.write("b.txt", "y" * 6)
    view.delete("big.txt")
    view.write("b.txt", "y" * 90)
    assert view.changes == {"a.txt": "y" * 5, "big.txt": None, "b.txt": "y" * 90}
    assert _files(tmp_path) == {"big.txt": "x" * 90}


def test_a_view_refuses_a_symlink_out_and_saving_refuses_one_made_since(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "away").symlink_to(outside, target_is_directory=True)
    space = FolderWorkspace(root)
    view = space.bind(None)
    with pytest.raises(WorkspaceError, match=r"a symlink on it leads outside") as caught:
        view.write("away/new.md", "x")
    assert caught.value.rule == "path"
    view.write("sub/new.md", "x")
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside, target_is_directory=True)  # a link made meanwhile
    with pytest.raises(WorkspaceError, match=r"'sub/new.md' is not allowed.*leads outside"):
        space.apply(view.changes)
    assert list(outside.iterdir()) == []


def test_applying_by_hand_keeps_the_path_rules(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match=r"it has a '\.\.' segment") as caught:
        FolderWorkspace(tmp_path / "root", create=True).apply({"../x.md": "x"})
    assert caught.value.rule == "path" and not (tmp_path / "x.md").exists()


# What the disk refuses, a crash, and fsync.


class _FullDisk(FolderWorkspace):
    """A folder whose disk has room for the first ``room`` files written aside."""

    room = 1

    def _aside(self, path: str, target: Path, text: str) -> Path:
        if self.room == 0:
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        self.room -= 1
        return super()._aside(path, target, text)


async def test_a_call_the_disk_refuses_changes_nothing_and_the_model_reads_why(
    tmp_path: Path,
) -> None:
    root = tmp_path / "a-private-root-folder"
    root.mkdir()
    (root / "a.md").write_text("old")

    @tool
    def two_files(files: Workspace) -> str:
        """Write two files."""
        files.write("a.md", "new")
        files.write("new/b.md", "b")
        return "written"

    agent = create_react_agent(
        ScriptedModel([ScriptedReply(tool_calls=[("two_files", {})]), "ok"]),
        [two_files],
        state=MessagesState,
        workspace=_FullDisk(root),
    )
    result = await agent.ainvoke({"messages": "go"})
    message = result.state.messages[2]
    assert message.status == "error"
    assert message.content == (
        "Error: Cannot save 'new/b.md' in the workspace folder: No space left on device. "
        "This call changed nothing. To fix it: delete files that are no longer needed, or "
        "write less."
    )
    assert "a-private-root-folder" not in message.content
    assert _files(root) == {"a.md": "old"}
    assert sorted(p.name for p in root.iterdir()) == ["a.md"]  # no file aside, no folder


def test_a_change_refused_after_others_were_saved_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").write_text("a file")
    space = FolderWorkspace(tmp_path)
    view = space.bind(None)
    view.write("new.md", "n")
    view.delete("a")
    view.write("a/x.md", "x")  # waits for the delete: written after it
    real_put = FolderWorkspace._put

    def refuse_x(self: FolderWorkspace, path: str, text: str | None) -> None:
        if path == "a/x.md":
            raise OSError(errno.EIO, "Input/output error", str(tmp_path / path))
        real_put(self, path, text)

    monkeypatch.setattr(FolderWorkspace, "_put", refuse_x)
    with pytest.raises(WorkspaceError) as caught:
        space.apply(view.changes)
    assert str(caught.value) == (
        "Cannot save 'a/x.md' in the workspace folder: Input/output error. The call's other "
        "changes were saved before it: new.md, a (deleted). To fix it: look at the files "
        "again, then call it again."
    )
    assert caught.value.rule == "disk" and str(tmp_path) not in str(caught.value)
    assert _files(tmp_path) == {"new.md": "n"}


def test_a_crash_between_two_files_leaves_each_whole_old_or_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.md").write_text("old a")
    (tmp_path / "b.md").write_text("old b")
    space = FolderWorkspace(tmp_path)
    view = space.bind(None)
    view.write("a.md", "new a")
    view.write("b.md", "new b")
    renamed: list[str] = []
    real_replace = os.replace

    class Crash(BaseException):
        pass

    def crash_second(source: Any, target: Any) -> None:
        if renamed:
            raise Crash
        renamed.append(str(target))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", crash_second)
    with pytest.raises(Crash):
        space.apply(view.changes)
    assert _files(tmp_path) == {"a.md": "new a", "b.md": "old b"}


def test_fsync_flushes_each_file_and_its_folder_before_it_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(fd) or real_fsync(fd))
    space = FolderWorkspace(tmp_path, fsync=True)
    view = space.bind(None)
    view.write("a.md", "a")
    view.write("d/b.md", "b")
    space.apply(view.changes)
    assert len(flushed) == 4  # two files, then their two folders
    flushed.clear()
    FolderWorkspace(tmp_path).apply({"c.md": "c"})
    assert flushed == [] and _files(tmp_path) == {"a.md": "a", "c.md": "c", "d/b.md": "b"}


# A pause, and the same answers as a workspace in the state.


@tool
def ask_human(question: str) -> str:
    """Ask a person.

    Args:
        question: What to ask.
    """
    return f"human said {interrupt({'q': question}, id='human')}"


async def test_a_write_beside_a_paused_call_is_saved_once_the_reply_resumes(
    tmp_path: Path,
) -> None:
    calls = [
        ("write_file", {"path": "plan.md", "content": "ship it"}),
        ("ask_human", {"question": "ship?"}),
    ]
    agent = create_react_agent(
        ScriptedModel([ScriptedReply(tool_calls=calls), "done"]),
        [*workspace_tools(), ask_human],
        state=MessagesState,
        workspace=FolderWorkspace(tmp_path),
        state_store=InMemoryStateStore(),
    )
    paused = await agent.ainvoke({"messages": "go"}, thread_id="t")
    assert paused.status == "interrupted" and _files(tmp_path) == {}
    done = await agent.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert [m.content for m in _tool_messages(done)] == ["Wrote plan.md.", "human said yes"]
    assert _files(tmp_path) == {"plan.md": "ship it"}


_op = st.tuples(
    st.sampled_from(["write", "edit", "delete", "read", "list", "glob"]),
    st.sampled_from(["a.md", "d/b.md", "d", "d/e/c.md", "../x", "d/b.md/z", "s.md"]),
    st.sampled_from(["x", "xx", "y"]),
)


def _apply_op(space: Workspace, op: tuple[str, str, str]) -> object:
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


@settings(max_examples=60, deadline=None)
@given(
    seed=st.sampled_from([{}, {"d/b.md": "x"}, {"a.md": "xx", "d/e/c.md": "x", "s.md": "y"}]),
    ops=st.lists(_op, max_size=12),
)
def test_a_call_on_a_folder_answers_and_saves_as_a_call_on_the_state_does(
    tmp_path_factory: pytest.TempPathFactory,
    seed: dict[str, str],
    ops: list[tuple[str, str, str]],
) -> None:
    root = tmp_path_factory.mktemp("call")
    for path, text in seed.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    folder = FolderWorkspace(root, max_total_bytes=12)
    view, state = folder.bind(None), Workspace(seed, max_total_bytes=12)
    for op in ops:
        assert _apply_op(view, op) == _apply_op(state, op), op
    assert view.changes == state.changes
    assert _files(root) == seed  # nothing saved while the call runs
    folder.apply(view.changes)
    assert _files(root) == dict(merge_files(seed, state.changes))
