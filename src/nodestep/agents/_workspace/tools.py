"""``workspace_tools``: the tools a model uses on the thread's files.

Each is an ordinary ``@tool`` whose ``Workspace`` parameter the tool node fills, so the
model sees only the arguments it writes (a path, a text). A refused call (a bad path, a
missing file, an edit whose old text is not there once, a size limit) raises
``WorkspaceError``, which the tool node sends back to the model as an error tool message.
"""

from __future__ import annotations

from nodestep._errors import GraphConfigError
from nodestep.agents._tools import Tool, tool
from nodestep.agents._workspace.handle import Workspace

__all__ = ["workspace_tools"]


@tool
def read_file(path: str, workspace: Workspace) -> str:
    """Read a file of the workspace and return its text.

    Args:
        path: The file's path in the workspace, e.g. 'notes/todo.md'.
    """
    return workspace.read(path)


@tool
def write_file(path: str, content: str, workspace: Workspace) -> str:
    """Write a file of the workspace, replacing it if it is there; folders are made.

    Args:
        path: The file's path in the workspace, e.g. 'notes/todo.md'.
        content: The whole text of the file.
    """
    workspace.write(path, content)
    return f"Wrote {path}."


@tool
def edit_file(
    path: str, old_text: str, new_text: str, workspace: Workspace, replace_all: bool = False
) -> str:
    """Replace an exact piece of text in a file of the workspace.

    Args:
        path: The file's path in the workspace.
        old_text: The text to replace, exactly as it is in the file; it must be there once.
        new_text: The text to put in its place.
        replace_all: Replace every occurrence of old_text instead of exactly one.
    """
    count = workspace.edit(path, old_text, new_text, replace_all=replace_all)
    return f"Edited {path}: replaced {count} place{'s' if count > 1 else ''}."


@tool
def list_files(workspace: Workspace, folder: str = "") -> list[str]:
    """List a folder of the workspace: its files, and its folders with a trailing '/'.

    Args:
        folder: The folder's path; empty for the top of the workspace.
    """
    return workspace.list(folder)


@tool
def glob_files(pattern: str, workspace: Workspace) -> list[str]:
    """Find the files of the workspace whose paths match a glob pattern: '*' matches within
    a folder, '**' any number of folders, '?' one character.

    Args:
        pattern: The pattern, e.g. '**/*.md' for every Markdown file, '*.md' for those at the top.
    """
    return workspace.glob(pattern)


@tool
def delete_file(path: str, workspace: Workspace) -> str:
    """Delete a file of the workspace.

    Args:
        path: The file's path in the workspace.
    """
    workspace.delete(path)
    return f"Deleted {path}."


_READING = (read_file, list_files, glob_files)
_WRITING = (write_file, edit_file, delete_file)


def workspace_tools(*, read_only: bool = False) -> list[Tool]:
    """Return the tools a model uses on the workspace.

    They are ``read_file``, ``list_files``, ``glob_files``, ``write_file``, ``edit_file``
    and ``delete_file``. Give them to ``create_react_agent`` (or a ``tool_node`` and its
    ``model_node``) with a state that has a ``WorkspaceFiles`` field, such as
    ``WorkspaceState``, or with ``workspace=FolderWorkspace(...)``.

    Args:
        read_only: Only the tools that read: ``read_file``, ``list_files``, ``glob_files``.

    Returns:
        The tools, a new list on each call.

    Raises:
        GraphConfigError: ``read_only`` is not a bool.
    """
    if not isinstance(read_only, bool):
        raise GraphConfigError(f"workspace_tools(read_only={read_only!r}) takes True or False.")
    return list(_READING if read_only else (*_READING, *_WRITING))
