"""``FolderWorkspace``: a workspace whose files are a folder on disk.

The same operations, path rules and size limits as a ``Workspace``; the files are real
files under the root, written at once (no state field holds them, so time travel and forks
do not include them). A path is checked by its text first, then on disk: a symlink (of
the file or of a folder on the way) that leads outside the root is refused, so a link
cannot take a call out of the workspace.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from nodestep._errors import GraphConfigError, WorkspaceError
from nodestep.agents._workspace.handle import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TOTAL_BYTES,
    Workspace,
)
from nodestep.agents._workspace.paths import in_folder

__all__ = ["FolderWorkspace"]


class FolderWorkspace(Workspace):
    """A workspace whose files are the files under a folder on disk.

    Give it to ``tool_node(workspace=...)`` or ``create_react_agent(workspace=...)``: the
    tools then read and write the folder itself. Writes are atomic (a file is written
    aside, then renamed over the old one), so a process that dies half-way leaves the old
    text or the new one. Checking ``max_total_bytes`` walks the folder on each write.

    Args:
        root: The folder.
        create: Make the folder if it is not there.
        max_file_bytes: The largest file, in UTF-8 bytes.
        max_total_bytes: The most all the files may hold, in UTF-8 bytes.

    Raises:
        GraphConfigError: the folder is not there (without ``create=True``), is a file,
            or a limit is not a positive int.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = False,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    ) -> None:
        super().__init__(max_file_bytes=max_file_bytes, max_total_bytes=max_total_bytes)
        self.field = None  # the files are on disk, not in the state
        folder = Path(root)
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        if not folder.is_dir():
            what = "a file" if folder.exists() else "not there"
            raise GraphConfigError(
                f"FolderWorkspace root {str(folder)!r} is {what}; give a folder, or pass "
                f"create=True to make it."
            )
        self.root = Path(os.path.realpath(folder))

    def bind(self, files: Mapping[str, str] | None) -> Workspace:
        """Return this workspace: its files are the folder's, whatever the state holds."""
        return self

    @property
    def changes(self) -> dict[str, str | None]:
        """Nothing: a folder's files are written at once, not through the state."""
        return {}

    def _real(self, normal: str) -> Path:
        """Return the file's path on disk, refusing one that a symlink leads outside."""
        target = self.root / normal
        resolved = os.path.realpath(target)
        if resolved != str(self.root) and not resolved.startswith(str(self.root) + os.sep):
            raise WorkspaceError(
                f"Path {normal!r} is not allowed in the workspace: a symlink on it leads "
                f"outside the workspace folder. Use a path whose folders are inside it.",
                path=normal,
                rule="path",
            )
        return target

    def _get(self, path: str) -> str | None:
        target = self._real(path)
        if not target.is_file():
            return None
        try:
            return target.read_bytes().decode("utf-8")
        except UnicodeDecodeError as error:
            raise WorkspaceError(
                f"Cannot read {path!r}: it is not UTF-8 text ({error.reason} at byte "
                f"{error.start}); a workspace holds text files.",
                path=path,
                rule="type",
            ) from None

    def _put(self, path: str, text: str | None) -> None:
        target = self._real(path)
        if text is None:
            target.unlink()
            self._prune(target.parent)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        self._real(path)  # a folder made on the way is no link, but check what was there
        handle, aside = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                out.write(text)
            os.replace(aside, target)
        except BaseException:
            Path(aside).unlink(missing_ok=True)
            raise

    def _prune(self, folder: Path) -> None:
        """Remove the folders a delete left empty, as a workspace in the state has none."""
        while folder != self.root and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent

    def _paths(self, folder: str) -> Iterator[str]:
        start = self._real(folder) if folder else self.root
        if not start.is_dir():
            return
        for here, folders, names in os.walk(start):
            folders.sort()
            relative = Path(here).relative_to(self.root).as_posix()
            prefix = "" if relative == "." else relative + "/"
            for name in sorted(names):
                path = prefix + name
                if in_folder(path, folder) and self._inside(path):
                    yield path

    def _inside(self, path: str) -> bool:
        try:
            return self._real(path).is_file()
        except WorkspaceError:
            return False  # a link out of the folder is not one of its files

    def _is_folder(self, path: str) -> bool:
        return self._real(path).is_dir()

    def _size(self) -> int:
        # The regular files only: a link inside the folder leads to a file counted
        # already, and one that leads outside holds nothing of the workspace.
        total = 0
        for here, _, _ in os.walk(self.root):
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        return total

    def __repr__(self) -> str:
        return f"FolderWorkspace({str(self.root)!r})"
