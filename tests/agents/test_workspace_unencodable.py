"""A workspace refuses what it cannot keep, as an error the caller (or the model) can act on.

A lone surrogate (half of a UTF-16 pair, such as a cut emoji) can be neither a file name on
disk nor text in a store's UTF-8; a set such as ``[z-a]`` is no glob pattern. Each is a
``WorkspaceError`` naming the value and the fix, on a ``Workspace`` and a ``FolderWorkspace``
alike, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import InMemoryStateStore, WorkspaceError
from nodestep.agents import (
    FolderWorkspace,
    ScriptedModel,
    ScriptedReply,
    Workspace,
    WorkspaceState,
    create_react_agent,
    tool,
)


def _spaces(tmp_path: Path) -> list[Workspace]:
    return [Workspace({"keep.md": "kept"}), FolderWorkspace(tmp_path, create=True)]


@pytest.mark.parametrize("path", ["cut\ud83d.md", "notes/\udc80/a.md"])
def test_a_path_with_a_lone_surrogate_is_refused_naming_it(path: str, tmp_path: Path) -> None:
    for space in _spaces(tmp_path):
        with pytest.raises(WorkspaceError, match=r"lone surrogate '\\ud[8-f]..' at index"):
            space.write(path, "x")
        with pytest.raises(WorkspaceError, match=r"lone surrogate '\\ud[8-f]..' at index"):
            space.read(path)
        with pytest.raises(WorkspaceError) as caught:
            space.glob(path)
        assert caught.value.rule == "path"
        assert "no file name can hold" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_text_with_a_lone_surrogate_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    for space in _spaces(tmp_path):
        space.write("keep.md", "kept")
        with pytest.raises(WorkspaceError) as caught:
            space.write("keep.md", "half an emoji \ud83d")
        assert caught.value.rule == "type"
        assert "'\\ud83d' at index 14" in str(caught.value)
        assert "encode('utf-8', 'replace')" in str(caught.value)
        with pytest.raises(WorkspaceError, match="lone surrogate"):
            space.edit("keep.md", "kept", "\udfff")
        assert space.read("keep.md") == "kept"


def test_a_tool_writing_a_lone_surrogate_gets_an_error_and_the_run_goes_on() -> None:
    @tool
    def save(files: Workspace) -> str:
        """Save a draft cut in the middle of an emoji."""
        files.write("draft.md", "tea \ud83c")
        return "saved"

    model = ScriptedModel([ScriptedReply(tool_calls=[("save", {})]), "I will retry."])
    agent = create_react_agent(
        model, [save], state=WorkspaceState, state_store=InMemoryStateStore()
    )
    result = agent.invoke({"messages": "Save it."}, thread_id="t")
    message = result.state.messages[2]
    assert message.status == "error"
    assert "lone surrogate '\\ud83c'" in message.content
    assert result.state.workspace == {}
    assert result.state.messages[-1].content == "I will retry."


@pytest.mark.parametrize("pattern", ["[z-a]*", "notes/[9-0].md", "[!z-a]"])
def test_a_glob_with_a_reversed_range_is_refused_naming_the_pattern(
    pattern: str, tmp_path: Path
) -> None:
    for space in _spaces(tmp_path):
        with pytest.raises(WorkspaceError) as caught:
            space.glob(pattern)
        assert caught.value.rule == "path"
        assert f"Pattern {pattern!r} is not a glob pattern" in str(caught.value)
        assert "'[a-z]'" in str(caught.value)


def test_a_glob_set_means_its_characters_never_a_regex_set_operation() -> None:
    # A regex set reads '--', '&&', '~~' and '||' as operations (with a FutureWarning, an
    # error under pytest): a glob's set holds those characters.
    space = Workspace({name: "" for name in ["a", "&", "~", "|", "-", "b", "c"]})
    assert space.glob("[a&&b]") == ["&", "a", "b"]
    assert space.glob("[~~|]") == ["|", "~"]
    assert space.glob("[a-]") == ["-", "a"]
    assert space.glob("[--a]") == ["-", "a"]
    assert space.glob("[!a-b]") == ["&", "-", "c", "|", "~"]
