"""``Workspace``: the files of a thread as a tool reads and changes them.

A tool asks for the workspace with a parameter annotated ``Workspace``; the tool node gives
each call its own ``Workspace`` over the files the state holds, and adds the files the call
changed to the node's update. So a tool never writes the store itself: its changes are a
write of the ``workspace`` field like any other, stored with the step, undone by time
travel, and kept by a fork.

The operations, their path rules and their size limits live here once; where the files are
is seven small methods (``_get``, ``_is_file``, ``_file_bytes``, ``_put``, ``_paths``,
``_size``, ``_is_folder``) that ``FolderWorkspace`` gives again for a folder on disk. Only
``_get`` reads a file's text: an operation that needs to know whether a file is there, or
its size, asks the other two, which a folder answers from the disk without reading it.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from typing import Any

from nodestep._errors import GraphConfigError, WorkspaceError
from nodestep._state.json import unencodable
from nodestep.agents._workspace.files import FileMap, file_bytes, merge_files
from nodestep.agents._workspace.paths import compile_glob, in_folder, normal_path

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "Workspace",
    "binds",
    "check_limit",
]

DEFAULT_MAX_FILE_BYTES = 1_000_000
"""The largest file a workspace takes by default, in UTF-8 bytes (1 MB)."""

DEFAULT_MAX_TOTAL_BYTES = 10_000_000
"""The most all the files of a workspace may hold by default, in UTF-8 bytes (10 MB)."""


def check_limit(name: str, value: object) -> int:
    """Return a size limit, or raise naming it when it is not a positive int.

    Raises:
        GraphConfigError: ``value`` is not an int above 0.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GraphConfigError(
            f"Workspace {name}={value!r} is not a size: give a number of bytes above 0, "
            f"e.g. {name}=1_000_000."
        )
    return value


class Workspace:
    """The files of a thread's workspace, as a tool reads and changes them.

    Made by a tool node for each tool call (from the settings of the ``Workspace`` given to
    ``tool_node(workspace=...)`` or ``create_react_agent(workspace=...)``, or the defaults),
    or by hand over a dict of files, e.g. to test a tool. Paths are relative and POSIX
    (``notes/todo.md``); a path with ``..``, an absolute path, a backslash or a control
    character is refused (see the rules in ``docs/workspaces.md``). Files hold text.

    Why writes are collected rather than stored: the tool node adds ``changes`` to its
    update, so the files change with the step that changed them, and a failed call
    changes nothing.

    Args:
        files: The files, path to text; ``None``: none.
        max_file_bytes: The largest file, in UTF-8 bytes.
        max_total_bytes: The most all the files may hold, in UTF-8 bytes.
        field: The state field that holds the files (a ``WorkspaceFiles`` field).

    Raises:
        GraphConfigError: a limit that is not a positive int, or a ``field`` that is not
            a name.
        WorkspaceError: a path of ``files`` that the rules refuse.
        TypeError: a file of ``files`` whose text is not a ``str``.
    """

    def __init__(
        self,
        files: Mapping[str, str] | None = None,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        field: str = "workspace",
    ) -> None:
        self.max_file_bytes = check_limit("max_file_bytes", max_file_bytes)
        self.max_total_bytes = check_limit("max_total_bytes", max_total_bytes)
        if not isinstance(field, str) or not field.isidentifier():
            raise GraphConfigError(
                f"Workspace field={field!r} is not a state field name; name the state's "
                f"WorkspaceFiles field, e.g. field='workspace'."
            )
        self.field: str | None = field
        # A dict given by hand goes through the reducer: its paths checked and made normal.
        self._base = files if isinstance(files, FileMap) else merge_files(None, files or {})
        self._changes: dict[str, str | None] = {}
        self._delta = 0

    def bind(self, files: Mapping[str, str] | None) -> Workspace:
        """Return a new ``Workspace`` with these settings over ``files``, with no changes.

        The tool node calls it for each tool call, with the state's files.
        """
        return Workspace(
            files,
            max_file_bytes=self.max_file_bytes,
            max_total_bytes=self.max_total_bytes,
            field=self.field or "workspace",
        )

    @property
    def changes(self) -> dict[str, str | None]:
        """The files changed since this ``Workspace`` was made: path to new text, ``None``
        for a deleted file. The tool node writes them to the state."""
        return dict(self._changes)

    # Where the files are: a dict of files and the changes made to it.

    def _get(self, path: str) -> str | None:
        if path in self._changes:
            return self._changes[path]
        found: str | None = self._base.get(path)
        return found

    def _is_file(self, path: str) -> bool:
        return self._get(path) is not None

    def _file_bytes(self, path: str) -> int | None:
        """Return the UTF-8 bytes of the file at ``path``; ``None``: no file there."""
        text = self._get(path)
        return None if text is None else file_bytes(text)

    def _put(self, path: str, text: str | None) -> None:
        old = self._get(path)
        self._delta += (0 if text is None else file_bytes(text)) - (
            0 if old is None else file_bytes(old)
        )
        if text is None and path not in self._base:
            self._changes.pop(path, None)  # made and deleted by this call: nothing to store
        else:
            self._changes[path] = text

    def _paths(self, folder: str) -> Iterator[str]:
        for path in self._base:
            if path not in self._changes and in_folder(path, folder):
                yield path
        for path, text in self._changes.items():
            if text is not None and in_folder(path, folder):
                yield path

    def _size(self) -> int:
        return self._base.total_bytes + self._delta

    def _is_folder(self, path: str) -> bool:
        # The base's counts, corrected by this call's changes: no pass over every file.
        count = self._base.files_in(path)
        for changed, text in self._changes.items():
            if in_folder(changed, path):
                was = changed in self._base
                count += (text is not None) - was
        return count > 0

    # The operations.

    def read(self, path: str) -> str:
        """Return the text of the file at ``path``.

        Raises:
            WorkspaceError: a path the rules refuse, or no file there (``rule="missing"``,
                naming the files nearby).
        """
        normal = normal_path(path)
        text = self._get(normal)
        if text is None:
            raise self._missing(path, normal)
        return text

    def exists(self, path: str) -> bool:
        """Tell whether a file is at ``path`` (a folder is not a file).

        Raises:
            WorkspaceError: a path the rules refuse.
        """
        return self._is_file(normal_path(path))

    def write(self, path: str, text: str) -> None:
        """Write ``text`` to the file at ``path``, replacing it if it is there; folders on
        the way are made.

        Raises:
            WorkspaceError: a path the rules refuse; text that is not a ``str``, or holds
                a lone surrogate (``rule="type"``); a file past ``max_file_bytes`` or a
                workspace past ``max_total_bytes`` (``rule="limit"``); a folder at
                ``path`` or a file where a folder of it should be (``rule="folder"``).
        """
        normal = normal_path(path)
        if not isinstance(text, str):
            raise WorkspaceError(
                f"Cannot write {type(text).__name__} to {path!r}: a workspace file holds "
                f"text; pass a str.",
                path=path,
                rule="type",
            )
        bad = None if text.isascii() else unencodable(text)
        if bad is not None:
            # Refused here, as a tool's error the model can act on, rather than when the
            # state or the disk fails to encode it after the call.
            raise WorkspaceError(
                f"Cannot write {path!r}: the text holds the lone surrogate {bad!r} at index "
                f"{text.index(str(bad))} (half of a UTF-16 pair, such as a cut emoji), which "
                f"UTF-8 cannot encode. Write whole characters: repair the text, e.g. "
                f"text.encode('utf-8', 'replace').decode() turns it into '?'.",
                path=path,
                rule="type",
            )
        self._check_room(path, normal, text)
        self._check_shape(path, normal)
        self._put(normal, text)

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace the exact text ``old`` with ``new`` in the file at ``path``.

        ``old`` must occur once, so an edit never changes a place the caller did not see;
        ``replace_all=True`` replaces every occurrence instead.

        Returns:
            How many places were replaced.

        Raises:
            WorkspaceError: a path the rules refuse; no file there; ``old`` empty, not in
                the file, or there more than once without ``replace_all``
                (``rule="edit"``); a result past a size limit.
        """
        text = self.read(path)
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise WorkspaceError(
                f"Cannot edit {path!r}: the old text must be a non-empty str and the new "
                f"text a str; to write the whole file, write it.",
                path=path,
                rule="edit",
            )
        count = text.count(old)
        if count == 0:
            raise WorkspaceError(
                f"Cannot edit {path!r}: the old text {_snippet(old)} is not in the file. "
                f"Read the file and give its text exactly, with the same spaces and line "
                f"breaks.",
                path=path,
                rule="edit",
            )
        if count > 1 and not replace_all:
            raise WorkspaceError(
                f"Cannot edit {path!r}: the old text {_snippet(old)} is in the file "
                f"{count} times. Give more of the text around the place to change, so "
                f"that it is there once, or replace every one with replace_all.",
                path=path,
                rule="edit",
            )
        self.write(path, text.replace(old, new))
        return count

    def delete(self, path: str) -> None:
        """Delete the file at ``path``.

        Raises:
            WorkspaceError: a path the rules refuse, or no file there.
        """
        normal = normal_path(path)
        if not self._is_file(normal):
            raise self._missing(path, normal)
        self._put(normal, None)

    def list(self, folder: str = "") -> list[str]:
        """Return what is in ``folder`` (``""``: the top), sorted: files by name, folders
        by name and a ``/``.

        Raises:
            WorkspaceError: a path the rules refuse; no such folder (``rule="missing"``);
                a file at ``folder`` (``rule="folder"``).
        """
        normal = normal_path(folder, root=True)
        if normal and self._is_file(normal):
            raise WorkspaceError(
                f"Cannot list {folder!r}: it is a file, not a folder; read it instead.",
                path=folder,
                rule="folder",
            )
        start = len(normal) + 1 if normal else 0
        entries: set[str] = set()
        for path in self._paths(normal):
            name, slash, _ = path[start:].partition("/")
            entries.add(name + slash)
        if normal and not entries:
            raise self._missing(folder, normal, kind="folder")
        return sorted(entries)

    def glob(self, pattern: str) -> builtins.list[str]:
        """Return the paths of the files that match ``pattern``, sorted.

        ``*`` matches within a folder, ``**`` any number of folders, ``?`` one character,
        ``[abc]`` one of a set: ``*.md`` matches at the top only, ``**/*.md`` anywhere.

        Raises:
            WorkspaceError: a pattern that breaks a path rule (``..``, absolute, ...).
        """
        regex = compile_glob(pattern)
        return sorted(path for path in self._paths("") if regex.fullmatch(path))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(list(self._paths('')))} files, {self._size()} bytes)"

    # The checks.

    def _check_room(self, path: str, normal: str, text: str) -> None:
        size = file_bytes(text)
        if size > self.max_file_bytes:
            raise WorkspaceError(
                f"Cannot write {path!r}: {size:,} bytes is more than a file may hold "
                f"(max_file_bytes={self.max_file_bytes:,}). Write less, or split it into "
                f"several files.",
                path=path,
                rule="limit",
            )
        total = self._size() - (self._file_bytes(normal) or 0) + size
        if total > self.max_total_bytes:
            raise WorkspaceError(
                f"Cannot write {path!r}: the workspace would hold {total:,} bytes, more "
                f"than its max_total_bytes={self.max_total_bytes:,}. Delete files you no "
                f"longer need, or write less.",
                path=path,
                rule="limit",
            )

    def _check_shape(self, path: str, normal: str) -> None:
        parts = normal.split("/")
        for end in range(1, len(parts)):
            parent = "/".join(parts[:end])
            if self._is_file(parent):
                raise WorkspaceError(
                    f"Cannot write {path!r}: {parent!r} is a file, so it cannot be a "
                    f"folder. Choose another path, or delete {parent!r} first.",
                    path=path,
                    rule="folder",
                )
        if not self._is_file(normal) and self._is_folder(normal):
            raise WorkspaceError(
                f"Cannot write {path!r}: it is a folder. Write a file inside it, e.g. "
                f"{normal + '/notes.md'!r}.",
                path=path,
                rule="folder",
            )

    def _missing(self, path: str, normal: str, kind: str = "file") -> WorkspaceError:
        folder = normal.rpartition("/")[0]
        try:
            nearby = self.list(folder)
        except WorkspaceError:
            nearby = self.list("")
        shown = ", ".join(nearby[:20]) + (", ..." if len(nearby) > 20 else "")
        where = f"folder {folder!r}" if folder and folder != normal else "the workspace"
        return WorkspaceError(
            f"There is no {kind} {path!r} in the workspace; {where} holds: "
            f"{shown or 'nothing'}. List the files to find the path.",
            path=path,
            rule="missing",
        )


def _snippet(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def binds(value: Any) -> bool:
    """Tell whether ``value`` is a ``Workspace`` (or a class of one), as a tool asks for it."""
    return isinstance(value, type) and issubclass(value, Workspace)
