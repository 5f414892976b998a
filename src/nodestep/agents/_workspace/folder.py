"""``FolderWorkspace``: a workspace whose files are a folder on disk.

The same operations, path rules and size limits as a ``Workspace``; the files are real
files under the root (no state field holds them, so time travel and forks do not include
them). A path is checked by its text first, then on disk: a symlink (of the file or of a
folder on the way) that leads outside the root is refused, so a link cannot take a call
out of the workspace.

A tool call gets a view of the folder (``bind``) that holds the call's changes in memory
and reads the folder for the rest; the tool node saves them (``apply``) once the call has
worked, in the order of the calls. Why: the promises of every workspace hold here too (a
failed call changes nothing, and the calls of one reply see the files as the reply found
them), and no file of the folder is half-written while another call reads it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path

from nodestep._errors import GraphConfigError, WorkspaceError
from nodestep.agents._workspace.files import file_bytes
from nodestep.agents._workspace.handle import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TOTAL_BYTES,
    Workspace,
)
from nodestep.agents._workspace.paths import in_folder, normal_path

__all__ = ["FolderWorkspace"]


class FolderWorkspace(Workspace):
    """A workspace whose files are the files under a folder on disk.

    Give it to ``tool_node(workspace=...)`` or ``create_react_agent(workspace=...)``: each
    tool call then reads the folder as the reply found it, with its own changes, which
    are saved to the folder when the call has worked (see ``bind`` and ``apply``). Used
    by hand, it reads and writes the folder at once. Writes are atomic (a file is written
    aside, then renamed over the old one), so a process that dies half-way leaves the old
    text or the new one. Checking ``max_total_bytes`` walks the folder: on each write
    used by hand, on a tool call's first write in a view.

    Args:
        root: The folder.
        create: Make the folder if it is not there.
        max_file_bytes: The largest file, in UTF-8 bytes.
        max_total_bytes: The most all the files may hold, in UTF-8 bytes.
        fsync: Flush each file (and its folder) to the disk before it counts as written,
            so a power cut leaves the old text or the new; without it, a crash of the
            process does, and a power cut may leave a file empty.

    Raises:
        GraphConfigError: ``root`` is not a path, the folder is not there (without
            ``create=True``) or cannot be made, is a file, or a limit is not a positive
            int.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = False,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        fsync: bool = False,
    ) -> None:
        super().__init__(max_file_bytes=max_file_bytes, max_total_bytes=max_total_bytes)
        self.field = None  # the files are on disk, not in the state
        self.fsync = fsync
        if not isinstance(root, str | os.PathLike):
            raise GraphConfigError(
                f"FolderWorkspace takes the folder's path as a str or a Path, got "
                f"{type(root).__name__} {root!r:.60}."
            )
        folder = Path(root)
        if folder.exists() and not folder.is_dir():
            # create=True cannot help here: a folder cannot be made where a file is.
            raise GraphConfigError(
                f"FolderWorkspace root {str(folder)!r} is a file, not a folder; give the "
                f"path of a folder, or of one to make with create=True."
            )
        if create:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise GraphConfigError(
                    f"FolderWorkspace cannot make the root {str(folder)!r}: {e.strerror or e}. "
                    f"Give a folder nodestep may create, or make it first."
                ) from None
        if not folder.is_dir():
            raise GraphConfigError(
                f"FolderWorkspace root {str(folder)!r} is not there; give a folder, or pass "
                f"create=True to make it."
            )
        self.root = Path(os.path.realpath(folder))

    def bind(self, files: Mapping[str, str] | None) -> Workspace:
        """Return a view of the folder for one tool call, with no changes.

        The view reads the folder, and holds the call's writes and deletes in memory,
        in its ``changes``, instead of making them: ``apply`` saves them once the call
        has worked. ``files`` is ignored: the files are the folder's, whatever the state
        holds.
        """
        return _FolderCall(self)

    @property
    def changes(self) -> dict[str, str | None]:
        """Nothing: used by hand, a folder workspace writes its files at once."""
        return {}

    def apply(self, changes: Mapping[str, str | None]) -> None:
        """Save the changes of a call's view to the folder: path to new text, ``None`` to
        delete the file.

        Every new text is written aside (in the folder of its file) before the first
        file is replaced, so a change the disk refuses (no space left, say) is found
        while nothing has changed, and nothing does. Then the files are renamed
        over the old ones, the deleted ones removed (with the folders that leaves empty),
        and last the files that take the place of a folder a delete removed, or of a
        file that stood where their folder goes. Why that order: a move (a write and a
        delete) that a crash cuts short leaves both files rather than neither. A crash
        while the files are renamed leaves some with their new text and the rest with
        their old, each whole.

        Raises:
            WorkspaceError: the disk refused a change (``rule="disk"``; nothing changed
                unless the message says which files were saved), or a symlink made
                since the call leads a path outside the folder (``rule="path"``).
        """
        files = {normal_path(path): text for path, text in changes.items()}
        early: list[tuple[str, str]] = []
        blocked: list[tuple[str, str]] = []
        asides: list[tuple[str, Path, Path]] = []
        made: list[Path] = []
        saved: list[str] = []
        path, text = "", None  # the change being made, which an error names
        try:
            for path, text in files.items():
                if text is not None:
                    (blocked if self._blocked(path) else early).append((path, text))
            for path, text in early:
                target = self._real(path)
                new = _first_missing(target.parent, self.root)
                made += [] if new is None else [new]
                asides.append((path, self._aside(path, target, text), target))
            for path, aside, target in asides:
                os.replace(aside, target)
                saved.append(path)
            # The files' folders hold their new entries, and a folder made for them is
            # an entry of its parent.
            self._flush({target.parent for *_, target in asides} | {m.parent for m in made})
            for path, text in files.items():
                if text is None:
                    with suppress(FileNotFoundError):  # deleted meanwhile by another hand
                        self._put(path, None)
                    saved.append(f"{path} (deleted)")
            for path, text in blocked:
                self._put(path, text)
                saved.append(path)
        except BaseException as error:
            _undo([aside for _, aside, _ in asides], made)
            if isinstance(error, OSError):
                raise _refused(path, text is None, error, saved) from None
            if isinstance(error, WorkspaceError) and saved:
                raise WorkspaceError(
                    f"{error} {_saved(saved)}", path=error.path, rule=error.rule
                ) from None
            raise

    def _real(self, normal: str) -> Path:
        """Return the file's path on disk, refusing one that a symlink leads outside, or
        with a name longer than the disk allows."""
        if len(normal) > _NAME_MAX // 4:  # a char is at most 4 bytes: shorter ones fit
            _check_names(normal)
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
        """Return the text of the file at ``path``, reading at most ``max_file_bytes``
        (and one more byte, to find a file that grew past it since its size was read).

        Why a file past the limit is refused rather than read: the folder may hold files
        no tool wrote (a log, a dump), and reading one whole would take its size in
        memory on every read, and in the model's context.
        """
        target = self._real(path)
        if not target.is_file():
            return None
        try:
            # Non-blocking: what was a file a moment ago may be a FIFO now.
            handle = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:  # deleted meanwhile by another hand
            return None
        with os.fdopen(handle, "rb") as file:
            found = os.fstat(handle)
            if not stat.S_ISREG(found.st_mode):
                return None
            if found.st_size > self.max_file_bytes:
                raise self._too_big(path, found.st_size)
            data = file.read(self.max_file_bytes + 1)
        if len(data) > self.max_file_bytes:
            raise self._too_big(path, None)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise WorkspaceError(
                f"Cannot read {path!r}: it is not UTF-8 text ({error.reason} at byte "
                f"{error.start}); a workspace holds text files.",
                path=path,
                rule="type",
            ) from None

    def _too_big(self, path: str, size: int | None) -> WorkspaceError:
        """Return the error for the file at ``path``, of ``size`` bytes (``None``: it grew
        past the limit while it was read)."""
        holds = f"{size:,} bytes, more" if size is not None else "more"
        return WorkspaceError(
            f"Cannot read {path!r}: the file holds {holds} than a file of the workspace may "
            f"hold (max_file_bytes={self.max_file_bytes:,}). Split the file on disk into "
            f"smaller ones, or give the FolderWorkspace a larger max_file_bytes; it can "
            f"still be written over or deleted.",
            path=path,
            rule="limit",
        )

    def _is_file(self, path: str) -> bool:
        return self._real(path).is_file()

    def _file_bytes(self, path: str) -> int | None:
        """Return the size of the file at ``path`` on disk, without reading it."""
        try:
            found = os.stat(self._real(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return found.st_size if stat.S_ISREG(found.st_mode) else None

    def _put(self, path: str, text: str | None) -> None:
        target = self._real(path)
        if text is None:
            target.unlink()
            self._prune(target.parent)
            self._flush({target.parent})
            return
        aside = self._aside(path, target, text)
        try:
            os.replace(aside, target)
        except BaseException:
            aside.unlink(missing_ok=True)
            raise
        self._flush({target.parent})

    def _aside(self, path: str, target: Path, text: str) -> Path:
        """Write ``text`` to a new file beside ``target``, making its folders; return it."""
        if not target.parent.is_dir():  # else the caller's check of the path holds
            target.parent.mkdir(parents=True, exist_ok=True)
            self._real(path)  # a folder made on the way is no link, but check what was there
        handle, aside = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                out.write(text)
                if self.fsync:
                    out.flush()
                    os.fsync(out.fileno())  # the rename must never publish a file not whole
        except BaseException:
            Path(aside).unlink(missing_ok=True)
            raise
        return Path(aside)

    def _flush(self, folders: set[Path]) -> None:
        """With ``fsync``, flush the folders whose entries changed, so a rename or a delete
        survives a power cut."""
        if not self.fsync or os.name == "nt":  # Windows opens no folder; NTFS journals it
            return
        for folder in sorted(folders):
            while folder != self.root and not folder.is_dir():
                folder = folder.parent  # pruned: its removal is an entry of its parent
            handle = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(handle)
            finally:
                os.close(handle)

    def _blocked(self, path: str) -> bool:
        """Tell whether writing ``path`` waits for a delete: a folder is at ``path`` on disk,
        or a file where one of its folders goes."""
        target = self.root / path
        if target.is_dir():
            return True
        folder = target.parent
        while folder != self.root:
            if folder.exists() and not folder.is_dir():
                return True
            folder = folder.parent
        return False

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


class _FolderCall(FolderWorkspace):
    """One tool call's view of a ``FolderWorkspace``: the folder as the reply found it, with
    the call's own changes, held in ``changes`` until the tool node saves them (``apply``).

    Why in memory rather than in files beside the folder: a file written aside would show
    in the folder (to the reply's other calls, and to a person) and stay there after a
    crash, while the text a view holds is the ``str`` the tool made, at most
    ``max_total_bytes`` in all. The files the call did not change are read from the
    folder each time, never held.
    """

    def __init__(self, folder: FolderWorkspace) -> None:
        Workspace.__init__(
            self, max_file_bytes=folder.max_file_bytes, max_total_bytes=folder.max_total_bytes
        )
        self.field = None
        self.root = folder.root
        self.fsync = folder.fsync
        self._found: int | None = None  # the bytes of the folder, counted once

    @property
    def changes(self) -> dict[str, str | None]:
        """The files the call changed: path to new text, ``None`` for a deleted file."""
        return dict(self._changes)

    def _get(self, path: str) -> str | None:
        if path in self._changes:
            return self._changes[path]
        return super()._get(path)

    def _is_file(self, path: str) -> bool:
        if path in self._changes:
            return self._changes[path] is not None
        return super()._is_file(path)

    def _file_bytes(self, path: str) -> int | None:
        if path in self._changes:
            text = self._changes[path]
            return None if text is None else file_bytes(text)
        return super()._file_bytes(path)

    def _put(self, path: str, text: str | None) -> None:
        # No check of links here: each operation looks at the path first (``_get``,
        # ``_is_file`` or ``_file_bytes``, which refuse a link out of the folder), and
        # ``apply`` checks it again on saving.
        target = self.root / path
        if path in self._changes:
            old = self._changes[path]
            before = 0 if old is None else file_bytes(old)
        else:
            before = self._disk_bytes(target)
        self._delta += (0 if text is None else file_bytes(text)) - before
        if text is None and not target.is_file():
            self._changes.pop(path, None)  # made and deleted by this call: nothing to save
        else:
            self._changes[path] = text

    @staticmethod
    def _disk_bytes(target: Path) -> int:
        """Return the bytes ``_size`` counts for ``target``: a regular file's, not a link's."""
        try:
            found = os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            return 0
        return found.st_size if stat.S_ISREG(found.st_mode) else 0

    def _paths(self, folder: str) -> Iterator[str]:
        for path in super()._paths(folder):
            if path not in self._changes:
                yield path
        for path, text in self._changes.items():
            if text is not None and in_folder(path, folder):
                yield path

    def _size(self) -> int:
        # The folder is counted once per view: the reply's calls change it only when all
        # have ended, and a reply's checks of its calls' changes (``workspace_writes``)
        # would otherwise walk it once per change.
        if self._found is None:
            self._found = super()._size()
        return self._found + self._delta

    def _is_folder(self, path: str) -> bool:
        for changed, text in self._changes.items():
            if text is not None and in_folder(changed, path):
                return True
        if not super()._is_folder(path):
            return False
        # A folder whose files the call deleted is no folder: saving the deletes removes
        # it. An empty folder on disk still is one, as it is to the folder itself.
        files = list(super()._paths(path))
        return not files or any(found not in self._changes for found in files)


def _first_missing(folder: Path, root: Path) -> Path | None:
    """Return the outermost folder of ``folder``'s way from ``root`` that is not there yet."""
    missing = None
    while folder != root and not os.path.lexists(folder):
        missing, folder = folder, folder.parent
    return missing


def _undo(asides: list[Path], made: list[Path]) -> None:
    """Remove the files written aside that were not renamed, and the folders made for
    them, unless a saved file is in one."""
    for aside in asides:
        aside.unlink(missing_ok=True)
    for folder in reversed(made):
        _remove_empty(folder)


def _remove_empty(top: Path) -> None:
    """Remove the folder ``top``, made for files that were not saved, and its empty folders."""
    for here, _, _ in os.walk(top, topdown=False):
        with suppress(OSError):  # something else was put there meanwhile: it stays
            os.rmdir(here)


_HINTS = {
    errno.ENOSPC: "delete files that are no longer needed, or write less",
    errno.ENAMETOOLONG: "choose a shorter name",
    errno.EACCES: "the folder's owner must let it be written; choose another path",
    errno.EPERM: "the folder's owner must let it be written; choose another path",
    errno.EROFS: "the folder is read-only; tell the user",
}


# The bytes a file or folder name may have: 255, the NAME_MAX of Linux, macOS and
# Windows' file systems, less the 10 that the name of the file a write makes beside its
# target adds (``_aside``). A longer one would be the OS's ENAMETOOLONG, whose text names
# the absolute path.
_NAME_MAX = 255 - 10


def _check_names(normal: str) -> None:
    """Refuse a path with a file or folder name of more than ``_NAME_MAX`` bytes.

    Raises:
        WorkspaceError: ``rule="path"``, naming the path, the name's length and the limit.
    """
    for name in normal.split("/"):
        size = len(name.encode("utf-8", "surrogatepass"))
        if size > _NAME_MAX:
            raise WorkspaceError(
                f"Path {normal!r} is not allowed in the workspace folder: its name "
                f"{name[:40]!r}... is {size} bytes long, and a file or folder name in the "
                f"folder holds at most {_NAME_MAX} bytes. Use a shorter name.",
                path=normal,
                rule="path",
            )


def _refused(path: str, deleting: bool, error: OSError, saved: list[str]) -> WorkspaceError:
    """Return the error of a change the disk refused, naming the path in the workspace.

    Only the error's ``strerror`` is shown: its text would name the absolute path on
    disk, which the model has no use for and must not learn.
    """
    why = error.strerror or type(error).__name__
    fix = _HINTS.get(error.errno or 0, "look at the files again, then call it again")
    return WorkspaceError(
        f"Cannot {'delete' if deleting else 'save'} {path!r} in the workspace folder: "
        f"{why}. {_saved(saved)} To fix it: {fix}.",
        path=path,
        rule="disk",
    )


def _saved(saved: list[str]) -> str:
    if not saved:
        return "This call changed nothing."
    return f"The call's other changes were saved before it: {', '.join(saved)}."
