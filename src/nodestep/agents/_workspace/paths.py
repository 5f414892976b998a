"""Workspace paths: the one normal form every back end keys its files by, and glob patterns.

A path is relative, POSIX, and stays inside the workspace: ``notes/todo.md``. The rules are
the same for every back end and every operating system, so a path a model learnt in one
workspace means the same file in another:

- ``/`` separates folders; a backslash is refused rather than read as a separator, since
  it is an ordinary character on POSIX and a separator on Windows;
- ``.`` and empty segments are dropped (``./a//b/`` is ``a/b``);
- ``..`` is refused anywhere, even where it would stay inside (``a/../b``): a model that
  climbs is told so, never silently moved;
- an absolute path (``/etc/passwd``), a drive (``C:``), a NUL or other control character
  is refused, and so is a lone surrogate (half of a UTF-16 pair), which neither a file
  name on disk nor a store's UTF-8 can hold.
"""

from __future__ import annotations

import re
from functools import lru_cache

from nodestep._errors import WorkspaceError
from nodestep._state.json import unencodable

__all__ = ["MAX_PATH_CHARS", "compile_glob", "in_folder", "normal_path"]

MAX_PATH_CHARS = 1024
"""The longest path a workspace takes, in characters (POSIX's ``PATH_MAX`` is 4,096 bytes)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def _refuse(path: str, why: str) -> WorkspaceError:
    return WorkspaceError(
        f"Path {path!r} is not allowed in the workspace: {why}. Paths are relative to the "
        f"workspace, with '/' between folders, e.g. 'notes/todo.md'.",
        path=path,
        rule="path",
    )


def normal_path(path: object, *, root: bool = False) -> str:
    """Return ``path`` in its normal form, or raise naming the rule it breaks.

    Args:
        path: The path as the caller (often a model) wrote it.
        root: Allow the workspace itself (``""`` or ``"."``), as a folder to list or search.

    Returns:
        The path's segments joined by ``/``, without ``.`` or empty segments; ``""`` for
        the workspace itself.

    Raises:
        WorkspaceError: ``rule="path"``: not a string, too long, absolute, a drive, a
            ``..`` segment, a backslash, a control character, a lone surrogate, or empty
            where a file is meant.
    """
    if not isinstance(path, str):
        raise WorkspaceError(
            f"A workspace path is a string, got {type(path).__name__}: {path!r}.",
            path=repr(path),
            rule="path",
        )
    if len(path) > MAX_PATH_CHARS:
        raise _refuse(path[:80] + "...", f"it is longer than {MAX_PATH_CHARS} characters")
    if _CONTROL.search(path):
        raise _refuse(path, "it holds a control character")
    if not path.isascii():  # ASCII, the common case, holds no surrogate: no encode
        bad = unencodable(path)
        if bad is not None:
            raise _refuse(
                path,
                f"it holds the lone surrogate {bad!r} at index {path.index(str(bad))} (half "
                f"of a UTF-16 pair, such as a cut emoji), which no file name can hold",
            )
    if "\\" in path:
        raise _refuse(path, "it holds a backslash; use '/' between folders")
    if path.startswith("/"):
        raise _refuse(path, "it is absolute; drop the leading '/'")
    if _DRIVE.match(path):
        raise _refuse(path, "it names a drive")
    segments = [segment for segment in path.split("/") if segment not in ("", ".")]
    if ".." in segments:
        raise _refuse(path, "it has a '..' segment, which could leave the workspace")
    if not segments and not root:
        raise _refuse(path, "it names no file")
    return "/".join(segments)


def in_folder(path: str, folder: str) -> bool:
    """Tell whether the normal ``path`` lies in the normal ``folder`` (``""``: anywhere)."""
    return not folder or path.startswith(folder + "/")


def _segment_regex(segment: str) -> str:
    """Return the regex of one pattern segment: ``*``, ``?`` and ``[...]`` stay in it."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        end = _set_end(segment, i) if char == "[" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif end > 0:
            body = segment[i + 1 : end]
            negate = body.startswith("!")
            body = _set_body(body[1:] if negate else body)
            out.append(("[^/" if negate else "[") + body + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _set_body(body: str) -> str:
    """Return the regex of a set's characters: its ranges kept, every other sign escaped.

    The hyphens that make ranges are found as ``fnmatch`` finds them (a ``-`` first or
    last is itself); the rest are escaped with the characters a regex set reads as
    operators (``\\ ^ [ ] & ~ |``), so a set such as ``[?--]`` or ``[a&&b]`` means its
    characters, never a set operation.
    """
    chunks: list[str] = []
    start, k = 0, 1  # a '-' at the start is a character
    while (k := body.find("-", k)) >= 0:
        chunks.append(body[start:k])
        start, k = k + 1, k + 3
    rest = body[start:]
    if rest:
        chunks.append(rest)
    else:
        chunks[-1] += "-"  # a '-' at the end is a character
    return "-".join(re.sub(r"([\\^\[\]&~|-])", r"\\\1", chunk) for chunk in chunks)


def _set_end(segment: str, start: int) -> int:
    """Return where the set opened at ``start`` closes, or -1: then ``[`` is a character.

    A ``]`` right after ``[`` (or ``[!``) belongs to the set, as in ``fnmatch``.
    """
    first = start + 1
    if segment[first : first + 1] == "!":
        first += 1
    return segment.find("]", first + 1)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Return the regex of a glob ``pattern`` over normal paths.

    ``*`` matches within one folder, ``**`` (a whole segment) any number of folders, ``?``
    one character, ``[abc]`` and ``[!abc]`` one of (or none of) a set. ``*.md`` matches
    only at the top: ``**/*.md`` matches everywhere.

    Raises:
        WorkspaceError: ``rule="path"``: the pattern breaks a path rule (see
            ``normal_path``), e.g. it starts with ``/`` or has a ``..`` segment, or a set
            in it has a reversed range, such as ``[z-a]``.
    """
    normal = normal_path(pattern)
    parts: list[str] = []
    segments = normal.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment_regex(segment) + ("" if last else "/"))
    try:
        return re.compile("".join(parts))
    except re.error as e:  # a set the regex engine refuses, such as the range [z-a]
        raise WorkspaceError(
            f"Pattern {pattern!r} is not a glob pattern: a set in it is not valid ({e.msg}). "
            f"A range in a set goes from the lower character to the higher, e.g. '[a-z]'.",
            path=pattern,
            rule="path",
        ) from None
