"""The workspace: its operations and limits, the state field that keeps the files, and the
tool node that writes a call's changes through the state."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    Command,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    StateUpdateError,
    WorkspaceError,
    node,
    tool,
)
from nodestep._engine.writer import CHECKPOINT_EVERY, ITEMS_PER_RECORD, checkpoint_spacing
from nodestep.agents import (
    FileMap,
    ScriptedModel,
    ScriptedReply,
    Workspace,
    WorkspaceFiles,
    WorkspaceState,
    create_react_agent,
    merge_files,
    tool_node,
    workspace_tools,
)
from nodestep.testing import replay

pytestmark = pytest.mark.anyio


# The operations of a Workspace over a dict of files.


def test_write_then_read_list_glob_and_delete_see_the_calls_own_changes() -> None:
    space = Workspace({"notes/a.md": "alpha", "top.txt": "t"})
    space.write("notes/deep/b.md", "beta")
    space.delete("top.txt")
    assert space.read("notes/deep/b.md") == "beta"
    assert space.list() == ["notes/"]
    assert space.list("notes") == ["a.md", "deep/"]
    assert space.glob("**/*.md") == ["notes/a.md", "notes/deep/b.md"]
    assert not space.exists("top.txt") and space.exists("./notes//a.md")
    assert space.changes == {"notes/deep/b.md": "beta", "top.txt": None}


def test_a_file_written_and_deleted_by_one_call_leaves_no_change() -> None:
    space = Workspace()
    space.write("tmp.txt", "x")
    space.delete("tmp.txt")
    assert space.changes == {}


def test_edit_replaces_text_that_is_there_once_and_says_how_many_places() -> None:
    space = Workspace({"todo.md": "- ship docs\n- fix bug\n"})
    assert space.edit("todo.md", "fix bug", "fix the login bug") == 1
    assert space.read("todo.md") == "- ship docs\n- fix the login bug\n"
    assert space.edit("todo.md", "- ", "* ", replace_all=True) == 2
    assert space.read("todo.md") == "* ship docs\n* fix the login bug\n"


@pytest.mark.parametrize(
    ("old", "replace_all", "message"),
    [
        ("fix the bug", False, "the old text 'fix the bug' is not in the file. Read the file"),
        ("- ", False, "the old text '- ' is in the file 2 times. Give more of the text"),
        ("", False, "the old text must be a non-empty str"),
        ("absent", True, "the old text 'absent' is not in the file"),
    ],
)
def test_an_edit_whose_old_text_is_missing_or_not_unique_is_refused_unchanged(
    old: str, replace_all: bool, message: str
) -> None:
    space = Workspace({"todo.md": "- ship docs\n- fix bug\n"})
    with pytest.raises(WorkspaceError, match=message) as caught:
        space.edit("todo.md", old, "new", replace_all=replace_all)
    assert caught.value.path == "todo.md" and caught.value.rule == "edit"
    assert space.changes == {}


def test_a_missing_file_or_folder_is_named_with_what_is_nearby() -> None:
    space = Workspace({"notes/a.md": "", "notes/b.md": "", "top.md": ""})
    with pytest.raises(WorkspaceError, match=r"no file 'notes/c.md' in the workspace; folder "):
        space.read("notes/c.md")
    with pytest.raises(WorkspaceError, match=r"holds: a.md, b.md") as caught:
        space.delete("notes/c.md")
    assert caught.value.rule == "missing"
    with pytest.raises(WorkspaceError, match=r"no folder 'docs'.*holds: notes/, top.md"):
        space.list("docs")


def test_a_file_cannot_stand_where_a_folder_is_nor_the_other_way_round() -> None:
    space = Workspace({"notes/a.md": "", "top.md": ""})
    with pytest.raises(WorkspaceError, match=r"'notes' is a folder|it is a folder") as caught:
        space.write("notes", "x")
    assert caught.value.rule == "folder"
    with pytest.raises(WorkspaceError, match=r"'top.md' is a file, so it cannot be a folder"):
        space.write("top.md/inside.md", "x")
    with pytest.raises(WorkspaceError, match=r"it is a file, not a folder"):
        space.list("top.md")


def test_a_file_holds_text_only() -> None:
    with pytest.raises(WorkspaceError, match=r"Cannot write bytes to 'a.bin'") as caught:
        Workspace().write("a.bin", b"\x00")  # type: ignore[arg-type]
    assert caught.value.rule == "type"


# Size limits.


def test_a_file_past_the_file_limit_is_refused_naming_the_path_and_the_limit() -> None:
    space = Workspace(max_file_bytes=10)
    space.write("ok.txt", "x" * 10)
    with pytest.raises(WorkspaceError) as caught:
        space.write("big.txt", "é" * 6)  # 12 bytes in UTF-8, though 6 characters
    assert str(caught.value) == (
        "Cannot write 'big.txt': 12 bytes is more than a file may hold "
        "(max_file_bytes=10). Write less, or split it into several files."
    )
    assert caught.value.rule == "limit" and caught.value.path == "big.txt"
    assert space.changes == {"ok.txt": "x" * 10}


def test_the_total_limit_counts_every_file_and_a_rewrite_counts_once() -> None:
    space = Workspace({"a.txt": "x" * 60}, max_total_bytes=100)
    space.write("a.txt", "y" * 90)  # replaces the 60 bytes: 90 in all
    space.write("b.txt", "z" * 10)
    with pytest.raises(WorkspaceError, match=r"would hold 101 bytes.*max_total_bytes=100"):
        space.write("c.txt", "!")
    space.delete("b.txt")
    space.write("c.txt", "!")
    assert space.read("c.txt") == "!"


def test_an_edit_that_grows_a_file_past_its_limit_is_refused() -> None:
    space = Workspace({"a.txt": "ab"}, max_file_bytes=5)
    with pytest.raises(WorkspaceError, match=r"max_file_bytes=5"):
        space.edit("a.txt", "b", "bbbbbb")
    assert space.read("a.txt") == "ab"


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "10"])
def test_a_limit_that_is_no_positive_int_is_refused(limit: object) -> None:
    with pytest.raises(GraphConfigError, match=r"Workspace max_file_bytes=.* is not a size"):
        Workspace(max_file_bytes=limit)  # type: ignore[arg-type]


def test_a_field_name_that_is_no_identifier_is_refused() -> None:
    with pytest.raises(GraphConfigError, match=r"field='my files' is not a state field name"):
        Workspace(field="my files")


# The state field.


def test_merge_files_writes_and_deletes_only_the_paths_it_is_given() -> None:
    base = merge_files(None, {"a.md": "A", "b.md": "B"})
    merged = merge_files(base, {"b.md": None, "./c.md": "C", "never.md": None})
    assert merged == {"a.md": "A", "c.md": "C"}
    assert base == {"a.md": "A", "b.md": "B"}  # the old value is unchanged
    assert merged.total_bytes == 2


def test_merge_files_refuses_a_bad_path_and_a_content_that_is_no_text() -> None:
    with pytest.raises(WorkspaceError, match=r"'..' segment"):
        merge_files(None, {"../x": "y"})
    with pytest.raises(TypeError, match=r"'a.md' was written a int; a file's content is a str"):
        merge_files(None, {"a.md": 3})
    with pytest.raises(TypeError, match=r"maps paths to texts"):
        merge_files(None, ["a.md"])  # type: ignore[arg-type]


def test_a_file_map_is_read_only_and_shared_rather_than_copied() -> None:
    files = FileMap({"a.md": "A"})
    with pytest.raises(TypeError, match=r"files of a workspace are read-only"):
        files["b.md"] = "B"
    with pytest.raises(TypeError, match=r"read-only"):
        files.pop("a.md")
    assert copy.deepcopy(files) is files and copy.copy(files) is files
    assert pickle.loads(pickle.dumps(files)) == files
    assert repr(files) == "FileMap({'a.md': 'A'})"


class Notes(MessagesState):
    notes: Annotated[dict[str, str], lambda a, b: {**a, **b}] = Field(default_factory=dict)


def _writer(state: WorkspaceState) -> dict:
    return {"workspace": {"x.md": "X"}}


async def test_update_state_refuses_a_path_that_leaves_the_workspace() -> None:
    writer = node(_writer, name="w")
    graph = Graph(WorkspaceState, state_store=InMemoryStateStore()).flow(
        START >> writer, writer >> END
    )
    await graph.ainvoke({}, thread_id="t")
    with pytest.raises(StateUpdateError, match=r"Path '/etc/passwd' is not allowed"):
        await graph.update_state("t", {"workspace": {"/etc/passwd": "x"}})
    await graph.update_state("t", {"workspace": {"y.md": "Y", "x.md": None}})
    assert (await graph.get_state("t")).value.workspace == {"y.md": "Y"}


def test_a_tool_node_with_workspace_tools_needs_a_workspace_field_with_merge_files() -> None:
    for state, problem in [
        (MessagesState, "has tools that use the workspace, kept in the state's 'workspace'"),
        (Notes, "but Notes has none"),
    ]:
        tools = tool_node(workspace_tools())
        with pytest.raises(GraphConfigError, match=problem):
            Graph(state).flow(START >> tools, tools >> END)
    tools = tool_node(workspace_tools(), workspace=Workspace(field="notes"))
    with pytest.raises(GraphConfigError, match=r"'notes' of Notes, which has no merge_files"):
        Graph(Notes).flow(START >> tools, tools >> END)


def test_the_field_type_must_be_a_dict_for_merge_files() -> None:
    class Wrong(MessagesState):
        workspace: Annotated[list[str], merge_files] = Field(default_factory=list)

    with pytest.raises(GraphConfigError, match=r"it merges files by path"):
        Graph(Wrong)


def test_tool_node_workspace_must_be_a_workspace() -> None:
    with pytest.raises(GraphConfigError, match=r"workspace= takes a Workspace.*got dict"):
        tool_node(workspace_tools(), workspace={"a": "b"})  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match=r"read_only='yes'"):
        workspace_tools(read_only="yes")  # type: ignore[arg-type]


# Tools.


def test_the_model_sees_the_tools_arguments_and_never_the_workspace() -> None:
    specs = {t.name: t.spec for t in workspace_tools()}
    assert list(specs) == [
        "read_file",
        "list_files",
        "glob_files",
        "write_file",
        "edit_file",
        "delete_file",
    ]
    assert set(specs["edit_file"]["parameters"]["properties"]) == {
        "path",
        "old_text",
        "new_text",
        "replace_all",
    }
    assert all("workspace" not in s["parameters"]["properties"] for s in specs.values())
    assert [t.name for t in workspace_tools(read_only=True)] == [
        "read_file",
        "list_files",
        "glob_files",
    ]


async def test_a_tool_of_your_own_gets_the_workspace_by_its_annotation() -> None:
    @tool
    def count_lines(path: str, files: Workspace) -> int:
        """Count the lines of a file.

        Args:
            path: The file.
        """
        return files.read(path).count("\n")

    assert count_lines.workspace_param == "files"
    assert await count_lines.ainvoke({"path": "a"}, workspace=Workspace({"a": "1\n2\n"})) == 2
    with pytest.raises(GraphConfigError, match=r"takes the workspace.*run it in a tool_node"):
        await count_lines.ainvoke({"path": "a"})


def _agent(replies: list[ScriptedReply | str], **options: object) -> Graph[WorkspaceState]:
    model = ScriptedModel(replies)
    return create_react_agent(
        model,
        workspace_tools(),
        state=WorkspaceState,
        state_store=InMemoryStateStore(),
        **options,  # type: ignore[arg-type]
    )


async def test_the_agent_writes_files_through_the_state_and_stores_only_the_changed_ones() -> None:
    agent = _agent(
        [
            ScriptedReply(tool_calls=[("write_file", {"path": "a.md", "content": "A"})]),
            ScriptedReply(tool_calls=[("write_file", {"path": "b.md", "content": "B"})]),
            "done",
        ]
    )
    result = await agent.ainvoke({"messages": "go"}, thread_id="t")
    assert result.state.workspace == {"a.md": "A", "b.md": "B"}
    history = await agent.history("t")
    writes = [
        task["update"]["workspace"]
        for event in history.events
        if event.type == "superstep_completed"
        for task in event.data["tasks"].values()
        if "workspace" in task.get("update", {})
    ]
    assert writes == [{"a.md": "A"}, {"b.md": "B"}]


async def test_concurrent_calls_see_the_files_as_the_reply_found_them_and_merge_in_call_order() -> (
    None
):
    agent = _agent(
        [
            ScriptedReply(
                tool_calls=[
                    ("write_file", {"path": "a.md", "content": "first"}),
                    ("list_files", {}),
                    ("write_file", {"path": "a.md", "content": "second"}),
                ]
            ),
            "done",
        ]
    )
    result = await agent.ainvoke({"messages": "go", "workspace": {"old.md": "o"}}, thread_id="t")
    assert result.state.workspace == {"a.md": "second", "old.md": "o"}
    listed = [m.content for m in result.state.messages if m.role == "tool"][1]
    assert listed == '["old.md"]'


async def test_a_call_whose_changes_clash_with_an_earlier_calls_is_refused_after_the_fact() -> None:
    agent = _agent(
        [
            ScriptedReply(
                tool_calls=[
                    ("write_file", {"path": "d", "content": "f"}),
                    ("write_file", {"path": "d/e.md", "content": "x"}),
                    ("write_file", {"path": "six.md", "content": "123456"}),
                    ("write_file", {"path": "more.md", "content": "123456"}),
                ]
            ),
            "done",
        ],
        workspace=Workspace(max_total_bytes=10),
    )
    result = await agent.ainvoke({"messages": "go"}, thread_id="t")
    assert result.state.workspace == {"d": "f", "six.md": "123456"}
    tool_messages = [m for m in result.state.messages if m.role == "tool"]
    assert [m.status for m in tool_messages] == ["ok", "error", "ok", "error"]
    assert tool_messages[1].content == (
        "Error: Cannot write 'd/e.md': 'd' is a file, so it cannot be a folder. Choose "
        "another path, or delete 'd' first. An earlier call of the same reply changed the "
        "workspace first, so this call changed nothing: look again, then call it again."
    )
    assert "would hold 13 bytes, more than its max_total_bytes=10" in tool_messages[3].content


async def test_a_failed_call_changes_no_file_and_the_model_reads_why() -> None:
    agent = _agent(
        [
            ScriptedReply(
                tool_calls=[
                    ("write_file", {"path": "../escape.md", "content": "x"}),
                    ("edit_file", {"path": "a.md", "old_text": "zz", "new_text": "y"}),
                    ("write_file", {"path": "big.md", "content": "x" * 50}),
                ]
            ),
            "done",
        ],
        workspace=Workspace(max_file_bytes=20),
    )
    result = await agent.ainvoke({"messages": "go", "workspace": {"a.md": "A"}}, thread_id="t")
    assert result.state.workspace == {"a.md": "A"}
    errors = [m.content for m in result.state.messages if m.role == "tool"]
    assert errors == [
        "Error: Path '../escape.md' is not allowed in the workspace: it has a '..' segment, "
        "which could leave the workspace. Paths are relative to the workspace, with '/' "
        "between folders, e.g. 'notes/todo.md'.",
        "Error: Cannot edit 'a.md': the old text 'zz' is not in the file. Read the file and "
        "give its text exactly, with the same spaces and line breaks.",
        "Error: Cannot write 'big.md': 50 bytes is more than a file may hold "
        "(max_file_bytes=20). Write less, or split it into several files.",
    ]


async def test_a_tool_that_raises_after_writing_leaves_the_files_as_they_were() -> None:
    @tool
    def half(workspace: Workspace) -> str:
        """Write a file, then fail."""
        workspace.write("half.md", "partial")
        raise RuntimeError("disk on fire")

    model = ScriptedModel([ScriptedReply(tool_calls=[("half", {})]), "done"])
    agent = create_react_agent(model, [half], state=WorkspaceState)
    result = await agent.ainvoke({"messages": "go"})
    assert result.state.workspace == {}
    assert "half raised RuntimeError: disk on fire" in result.state.messages[2].content


async def test_the_workspace_can_live_in_a_field_of_another_name() -> None:
    class Project(MessagesState):
        files: WorkspaceFiles = Field(default_factory=FileMap)

    model = ScriptedModel(
        [ScriptedReply(tool_calls=[("write_file", {"path": "p.md", "content": "P"})]), "ok"]
    )
    agent = create_react_agent(
        model, workspace_tools(), state=Project, workspace=Workspace(field="files")
    )
    assert (await agent.ainvoke({"messages": "go"})).state.files == {"p.md": "P"}


# Time travel and forks.


async def test_time_travel_and_a_fork_hold_the_files_of_their_point_in_history() -> None:
    agent = _agent(
        [
            ScriptedReply(tool_calls=[("write_file", {"path": "plan.md", "content": "v1"})]),
            "first",
            ScriptedReply(tool_calls=[("write_file", {"path": "plan.md", "content": "v2"})]),
            "second",
        ]
    )
    first = await agent.ainvoke({"messages": "one"}, thread_id="t")
    second = await agent.ainvoke({"messages": "two"}, thread_id="t")
    assert second.state.workspace == {"plan.md": "v2"}

    back = await agent.get_state("t", first.checkpoint_id)
    assert back.value.workspace == {"plan.md": "v1"}

    branch = await agent.fork("t", from_=first.checkpoint_id, name="alt")
    forked = await agent.get_state("t", branch_id=branch.id)
    assert forked.value.workspace == {"plan.md": "v1"}
    await agent.update_state("t", {"workspace": {"plan.md": None}}, branch_id=branch.id)
    assert (await agent.get_state("t", branch_id=branch.id)).value.workspace == {}
    assert (await agent.get_state("t")).value.workspace == {"plan.md": "v2"}


# Replaying the history gives the same files.

PATHS = ["a.md", "b.md", "d/c.md"]
_call = st.one_of(
    st.tuples(st.just("write_file"), st.sampled_from(PATHS), st.sampled_from(["x", "xy", "yx"])),
    st.tuples(st.just("delete_file"), st.sampled_from(PATHS), st.just("")),
    st.tuples(st.just("edit_file"), st.sampled_from(PATHS), st.sampled_from(["x", "y"])),
)
_replies = st.lists(st.lists(_call, min_size=1, max_size=3), min_size=1, max_size=4)


def _arguments(kind: str, path: str, text: str) -> dict[str, str]:
    if kind == "write_file":
        return {"path": path, "content": text}
    if kind == "edit_file":
        return {"path": path, "old_text": text, "new_text": "z"}
    return {"path": path}


def _expected(files: dict[str, str], calls: list[tuple[str, str, str]]) -> dict[str, str]:
    """The files after one reply: each call sees the files as the reply found them; the
    changes of the calls that worked merge in call order."""
    changes: dict[str, str | None] = {}
    for kind, path, text in calls:
        old = files.get(path)
        if kind == "write_file":
            changes[path] = text
        elif kind == "delete_file" and old is not None:
            changes[path] = None
        elif kind == "edit_file" and old is not None and old.count(text) == 1:
            changes[path] = old.replace(text, "z")
    merged = {**files, **changes}
    return {path: text for path, text in merged.items() if text is not None}


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(replies=_replies)
def test_a_replayed_and_a_travelled_history_give_the_files_of_the_live_run(
    replies: list[list[tuple[str, str, str]]],
) -> None:
    script = [
        ScriptedReply(tool_calls=[(k, _arguments(k, p, t)) for k, p, t in calls])
        for calls in replies
    ]
    store = InMemoryStateStore()
    live = create_react_agent(
        ScriptedModel([*script, "done"]), workspace_tools(), state=WorkspaceState, state_store=store
    )
    result = live.invoke({"messages": "go"}, thread_id="t")
    states = [{}]
    for calls in replies:
        states.append(_expected(states[-1], calls))
    assert result.state.workspace == states[-1]

    # A new graph on the same store has no cached position: it folds the stored records.
    replayed = create_react_agent(
        ScriptedModel([]), workspace_tools(), state=WorkspaceState, state_store=store
    )
    assert anyio.run(replayed.get_state, "t").value.workspace == states[-1]

    history = anyio.run(replayed.history, "t")
    tool_steps = [
        event
        for event in history.events
        if event.type == "superstep_completed" and "tools" in event.data["tasks"]
    ]
    for event, files in zip(tool_steps, states[1:], strict=True):
        assert anyio.run(replayed.get_state, "t", event.id).value.workspace == files


def test_a_long_thread_folds_its_files_from_the_last_checkpoint_as_they_were_live(
    tmp_path: Path,
) -> None:
    script = [
        ScriptedReply(tool_calls=[("write_file", {"path": f"f{i % 7}.md", "content": str(i)})])
        for i in range(40)
    ]
    store = FilesystemStateStore(tmp_path / "history.jsonl")
    live = create_react_agent(
        ScriptedModel([*script, "done"]),
        workspace_tools(),
        state=WorkspaceState,
        state_store=store,
        max_steps=100,
    )
    result = live.invoke({"messages": "go"}, thread_id="t")
    history = anyio.run(live.history, "t")
    assert len(history.checkpoints) >= 2  # the load starts from a later checkpoint
    # A new store on the same file reads the records back from their bytes.
    reread = FilesystemStateStore(tmp_path / "history.jsonl")
    replayed = create_react_agent(
        ScriptedModel([]), workspace_tools(), state=WorkspaceState, state_store=reread
    )
    files = anyio.run(replayed.get_state, "t").value.workspace
    assert isinstance(files, FileMap) and files == result.state.workspace
    assert result.state.workspace == {f"f{i % 7}.md": str(i) for i in range(33, 40)}


def test_a_folder_emptied_by_the_call_may_become_a_file_and_a_new_one_may_not() -> None:
    space = Workspace({"notes/a.md": "", "other/b.md": ""})
    space.delete("notes/a.md")
    space.write("notes", "now a file")
    space.write("fresh/c.md", "")
    with pytest.raises(WorkspaceError, match=r"'fresh'.*it is a folder"):
        space.write("fresh", "x")
    assert space.list() == ["fresh/", "notes", "other/"]


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "a/b", "a/b/c", "d/e", "a/x", "d"]), st.none() | st.just("t")
        ),
        max_size=12,
    )
)
def test_the_folder_counts_kept_as_writes_merge_equal_counts_made_afresh(
    writes: list[tuple[str, str | None]],
) -> None:
    files = FileMap()
    files.files_in("")  # counts made now, then kept by each merge
    for path, text in writes:
        files = merge_files(files, {path: text})
        fresh = FileMap(files)
        for folder in ["a", "a/b", "d", "x"]:
            assert files.files_in(folder) == fresh.files_in(folder)
        assert files.total_bytes == fresh.total_bytes


def test_files_given_by_hand_are_checked_and_made_normal() -> None:
    assert Workspace({"./notes//a.md": "A"}).read("notes/a.md") == "A"
    with pytest.raises(WorkspaceError, match=r"'/etc/passwd' is not allowed"):
        Workspace({"/etc/passwd": "x"})


# Checkpoints.


def test_checkpoints_of_a_large_workspace_are_spaced_by_its_bytes_not_its_file_count() -> None:
    few_large = FileMap({"a.txt": "x" * 256_000, "b.txt": ""})
    assert checkpoint_spacing({"workspace": few_large}) == (2 + 1000) // ITEMS_PER_RECORD
    assert checkpoint_spacing({"workspace": FileMap({"a.txt": "small"})}) == CHECKPOINT_EVERY


@node(goto=["count_up", END])
def count_up(state: WorkspaceState) -> Command:
    n = int(state.workspace.get("count", "0")) + 1
    return Command(update={"workspace": {"count": str(n)}}, goto="count_up" if n < 100 else END)


def test_a_thread_with_a_large_workspace_does_not_store_it_again_every_50_records() -> None:
    graph = Graph(WorkspaceState, state_store=InMemoryStateStore(), max_steps=200).flow(
        START >> count_up
    )
    graph.invoke({"workspace": {"big.txt": "x" * 400_000}}, thread_id="t")
    history = anyio.run(graph.history, "t")
    assert [event.sequence for event in history.checkpoints] == [1]


async def test_a_recorded_replay_gives_the_files_from_the_record_without_running_the_tools() -> (
    None
):
    store = InMemoryStateStore()
    script = [
        ScriptedReply(
            tool_calls=[
                ("write_file", {"path": "a.md", "content": "A"}),
                ("write_file", {"path": "b.md", "content": "B"}),
            ]
        ),
        "done",
    ]
    live = create_react_agent(
        ScriptedModel(script), workspace_tools(), state=WorkspaceState, state_store=store
    )
    await live.ainvoke({"messages": "go"}, thread_id="t")

    @tool(name="write_file")
    def refuse(path: str, content: str, workspace: Workspace) -> str:
        """Fail: a recorded replay must not run the tool.

        Args:
            path: The path.
            content: The text.
        """
        raise AssertionError("a recorded replay ran the tool")

    silent = create_react_agent(ScriptedModel([]), [refuse], state=WorkspaceState)
    report = await replay(silent, store, "t", recorded=True)
    assert report.clean, report
