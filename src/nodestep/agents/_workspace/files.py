"""The workspace field: the files of a thread, kept in its state, and the reducer that merges
a write into them.

A write names only the files it changes (``{"notes.md": "new text", "old.md": None}``:
``None`` deletes), and the history stores the write, so a step that changes one file stores
one file, however large the workspace is. Time travel and forks then hold the files as
they hold any field: the state at an event is the fold of the writes before it.

The merged value is a ``FileMap``, a read-only dict the engine shares between steps
instead of copying (as it shares the conversation's ``MessageList``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, NoReturn, get_origin

from pydantic import Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from nodestep._display.text import short_repr
from nodestep._state.field_types import type_name
from nodestep._state.reducers import checks_field_type
from nodestep.agents._conversation import MessagesState
from nodestep.agents._workspace.paths import normal_path

__all__ = [
    "BYTES_PER_ITEM",
    "FileMap",
    "WorkspaceFiles",
    "WorkspaceState",
    "file_bytes",
    "merge_files",
]


BYTES_PER_ITEM = 256
"""The bytes of files that count as one item of the state when checkpoints are spaced (about
a chat message's JSON)."""


def file_bytes(content: str) -> int:
    """Return the size of a file's text in UTF-8 bytes, the unit of the size limits."""
    return len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError(
        "The files of a workspace are read-only: a node returns the files it changes, e.g. "
        "{'workspace': {'notes.md': 'text'}} (None deletes a file), and merge_files merges "
        "them; a tool changes them through its Workspace parameter."
    )


class FileMap(dict[str, Any]):
    """The read-only dict of files (path to text) that a ``WorkspaceFiles`` field holds.

    It is a ``dict`` for reading; changing it in place raises ``TypeError``, because the
    engine shares it between steps. Its ``total_bytes`` is kept as writes merge, so a
    size check does not read every file again.
    """

    __slots__ = ("_bytes", "_folders")
    __nodestep_frozen__ = True  # never changed once made: the engine shares it

    def __init__(self, files: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        dict.__init__(self, files)
        self._bytes: int | None = None
        self._folders: dict[str, int] | None = None

    @property
    def total_bytes(self) -> int:
        """The size of all the files, in UTF-8 bytes."""
        if self._bytes is None:
            self._bytes = sum(file_bytes(text) for text in self.values() if text is not None)
        return self._bytes

    def files_in(self, folder: str) -> int:
        """Return how many files lie in ``folder`` (a normal path), at any depth.

        Why counts: a write must know whether its path is a folder, and asking each path
        would cost every write a pass over the whole workspace. The counts are made once
        for a map read from a store, then kept as writes merge.
        """
        if self._folders is None:
            counts: dict[str, int] = {}
            for path in self:
                _count_folders(counts, path, 1)
            self._folders = counts
        return self._folders.get(folder, 0)

    def __nodestep_items__(self) -> int:
        """Count the files as items of the state, one more per 256 bytes they hold.

        Why: a checkpoint writes every file, and checkpoints are spaced by the state's
        items (``checkpoint_spacing``); counted by their number alone, a few large files
        would be written again every 50 records, a cost per step that grows with them.
        """
        return len(self) + self.total_bytes // BYTES_PER_ITEM

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> FileMap:
        return self  # read-only, and its values are strings

    def __copy__(self) -> FileMap:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FileMap, (dict(self),))

    def __repr__(self) -> str:
        return f"FileMap({short_repr(dict(self), width=290)})"


def _not_files(annotation: Any) -> str | None:
    if get_origin(annotation) is dict or annotation is FileMap:
        return None
    return (
        f"it merges files by path, and the field's type {type_name(annotation)} is not a "
        f"dict. Declare workspace: WorkspaceFiles = Field(default_factory=FileMap), or "
        f"subclass WorkspaceState"
    )


@checks_field_type(_not_files)
def merge_files(current: Mapping[str, Any] | None, update: Mapping[str, Any]) -> FileMap:
    """Merge a write of files into the workspace: each path gets its new text, or with
    ``None`` is deleted (a path that is not there is left alone).

    Raises:
        WorkspaceError: a path the workspace does not allow (``..``, absolute, ...).
        TypeError: the update is not a dict, or a file's text is not a string.
    """
    if not isinstance(update, Mapping):
        raise TypeError(
            f"A workspace write maps paths to texts (None deletes), got "
            f"{type(update).__name__}: {short_repr(update)}."
        )
    base = current if isinstance(current, FileMap) else FileMap(current or {})
    known = base.total_bytes
    folders = None if base._folders is None else dict(base._folders)
    out = FileMap(base)
    for raw, text in update.items():
        path = normal_path(raw)
        old = out.get(path)
        if text is None:
            if old is not None:
                dict.__delitem__(out, path)
        elif isinstance(text, str):
            dict.__setitem__(out, path, text)
        else:
            raise TypeError(
                f"The workspace file {path!r} was written a {type(text).__name__}; a "
                f"file's content is a str (None deletes the file)."
            )
        known += (0 if text is None else file_bytes(text)) - (0 if old is None else file_bytes(old))
        if folders is not None and (old is None) != (text is None):
            _count_folders(folders, path, 1 if old is None else -1)
    out._bytes, out._folders = known, folders
    return out


def _count_folders(counts: dict[str, int], path: str, change: int) -> None:
    """Add ``change`` to the file count of each folder ``path`` lies in."""
    end = path.rfind("/")
    while end > 0:
        folder = path[:end]
        left = counts.get(folder, 0) + change
        if left:
            counts[folder] = left
        else:
            del counts[folder]
        end = path.rfind("/", 0, end)


def _normal(value: Mapping[str, Any]) -> FileMap:
    return FileMap((normal_path(path), text) for path, text in value.items())


class _Paths:
    """Pydantic metadata of ``WorkspaceFiles``: normal paths, held in a ``FileMap``.

    A plain object rather than pydantic's ``AfterValidator``: the state schema checks a
    reducer field's whole merged value again when its metadata comes from pydantic, which
    would cost every step a pass over the whole workspace. Each write is checked alone.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_normal, handler(source))


WorkspaceFiles = Annotated[dict[str, str | None], _Paths(), merge_files]
"""A state field type for the files of a workspace, declared as
``workspace: WorkspaceFiles = Field(default_factory=FileMap)``.

A write maps paths to their new text, ``None`` to delete one, and merges with
``merge_files``; the field reads as a read-only ``FileMap`` of paths to texts.
"""


class WorkspaceState(MessagesState):
    """A ``MessagesState`` with a ``workspace`` field: the thread's files. Subclass it to add
    fields."""

    workspace: WorkspaceFiles = Field(default_factory=FileMap)
