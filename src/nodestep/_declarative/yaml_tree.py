"""Read YAML files safely into values that remember their file, line and column.

Safe by construction: the text is only *composed* (PyYAML's parser builds a node tree)
and this module turns the nodes into plain values itself. No constructor runs, so no tag
can build a Python object; a tag other than the plain ones, an alias (which could expand
a small file into a huge one) or a merge key is a problem at its place, never a value
(the composer keeps an alias where it is written, never the node it names). Nesting is
bounded (``MAX_DEPTH``) before the tree is composed, and a scalar its tag cannot read
(``!!int abc``, an integer of 5,000 digits) is a problem at its place, so hostile text
gets a ``GraphConfigError`` at a file and line, never a raw ``RecursionError`` or
``ValueError``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodestep._errors import GraphConfigError

__all__ = ["Problems", "Y", "read_documents"]

_PLAIN = "tag:yaml.org,2002:"

TEXT_KEYS = frozenset({"name", "target", "when", "start", "state", "context", "function"})
"""Keys whose values are text whatever they look like: ``when: true`` is the condition
``true`` and ``name: yes`` the node ``yes``, not YAML 1.1's booleans."""
_SCALARS = {"str", "int", "float", "bool", "null", "timestamp"}

_ALIAS = "nodestep:alias"
"""The tag of the node the composer puts where an alias (``*name``) is written."""

MAX_DEPTH = 100
"""How deeply lists and mappings may nest in a manifest. PyYAML composes a tree by
recursion, so a file of 5,000 ``[`` would exhaust Python's stack; the depth is checked on
the parser's events first, which come without recursion."""


@dataclass(frozen=True, slots=True)
class Y:
    """A value read from YAML, with where it was written.

    Attributes:
        value: A str, int, float, bool or None; a ``dict[str, Y]``; or a ``list[Y]``.
        file: The file.
        line: The 1-based line.
        column: The 1-based column.
        quoted: Whether a scalar was written in quotes (its text starts one column on).
        positions: For a text scalar, the 1-based line and column in the file of each
            character of ``value`` (``scalar_positions``); ``None`` when not known.
        reported: The text could not be read as a value (an alias, a tag, ``!!int abc``),
            which is a problem already given here; ``value`` is ``None``.
    """

    value: Any
    file: str
    line: int
    column: int
    quoted: bool = False
    positions: tuple[tuple[int, int], ...] | None = field(default=None, compare=False, repr=False)
    reported: bool = field(default=False, compare=False, repr=False)

    def __repr__(self) -> str:
        """Return the repr of the value as written, a list's or mapping's items included.

        Why not the dataclass's repr: problems show a culprit with ``{y.value!r}``, and a
        list's or mapping's value holds ``Y`` items, which would print the loader's
        wrappers (``[Y(value='a', file=...)]``) where the user wrote ``[a]``. The place is
        ``at``, which every problem starts with.
        """
        return repr(self.value)

    @property
    def at(self) -> str:
        """``file:line:column``, the start of every message about this value."""
        return f"{self.file}:{self.line}:{self.column}"


class Problems:
    """The problems found so far, each placed at a file, line and column."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: Y | str, message: str) -> None:
        """Add ``message`` at ``where`` (a value, or a ``file:line:column`` string).

        A problem at a value the reader could not read (``Y.reported``) is dropped: the
        reader said what is wrong there, and what a check finds of its ``None`` follows
        from that ("a node is a mapping", "has no edges") and would only bury it.
        """
        if isinstance(where, Y) and where.reported:
            return
        at = where.at if isinstance(where, Y) else where
        self.items.append(f"{at}: {message}")

    def raise_if_any(self, what: str) -> None:
        """Raise every problem at once.

        Raises:
            GraphConfigError: listing each problem, when there is one.
        """
        if self.items:
            listing = "\n".join(f"- {p}" for p in self.items)
            raise GraphConfigError(f"{what}:\n{listing}", self.items)


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise GraphConfigError(
            "Loading YAML manifests needs PyYAML, which is not installed; run "
            "pip install 'nodestep[yaml]'."
        ) from None
    return yaml


def read_documents(path: Path, problems: Problems) -> list[Y]:
    """Return the documents of the YAML file ``path`` (several when it has ``---``)."""
    yaml = _yaml()
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        too_deep = _too_deep(yaml, text)
        if too_deep is not None:
            at = f"{file}:{too_deep.line + 1}:{too_deep.column + 1}"
            problems.add(
                at,
                f"the lists and mappings here nest deeper than {MAX_DEPTH} levels; a "
                f"manifest is shallower: flatten the value",
            )
            return []
        nodes = list(yaml.compose_all(text, Loader=_loader()))
    except OSError as error:
        problems.add(f"{file}:1:1", f"cannot read the file ({error.strerror}); check the path")
        return []
    except UnicodeDecodeError:
        problems.add(f"{file}:1:1", "the file is not UTF-8 text; save it as UTF-8")
        return []
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        at = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else f"{file}:1:1"
        lines = text.splitlines() if mark else []
        line = lines[mark.line] if mark and mark.line < len(lines) else ""
        problems.add(at, f"this is not valid YAML: {error.problem or error}{_bang_hint(line)}")
        return []
    except yaml.YAMLError as error:
        problems.add(f"{file}:1:1", f"this is not valid YAML: {error}")
        return []
    reader = _Reader(file, problems)
    return [reader.value(node) for node in nodes if node is not None]


def _bang_hint(line: str) -> str:
    """Say how to write a value that starts with ``!`` when ``line`` holds one unquoted.

    YAML reads ``when: !done`` as the tag ``!done``, not as a condition that negates.
    """
    if re.search(r"(?:^|[:\-\[,{])\s*![^!]", line) is None:
        return ""
    return "; a value that starts with '!' (a condition such as !done) must be quoted: '!done'"


def _too_deep(yaml: Any, text: str) -> Any:
    """Return the mark where ``text`` nests deeper than ``MAX_DEPTH``, or ``None``."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return event.start_mark
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


@functools.cache
def _loader() -> Any:
    """Return PyYAML's safe loader with a composer that keeps an alias where it is written.

    Why: PyYAML's composer gives an alias the very node its anchor names, so the alias
    had no place of its own: it was reported at the anchor. Here an alias becomes a scalar
    tagged ``_ALIAS`` with the alias's marks, which the reader reports at its place; no
    node is shared, so nothing is expanded. An alias with no anchor is the same problem.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            if self.check_event(yaml.AliasEvent):
                # types-PyYAML leaves the parser's get_event unannotated.
                event = self.get_event()  # type: ignore[no-untyped-call]
                return yaml.ScalarNode(_ALIAS, event.anchor, event.start_mark, event.end_mark)
            return super().compose_node(parent, index)

    return Loader


class _Reader:
    def __init__(self, file: str, problems: Problems) -> None:
        self.file = file
        self.problems = problems

    def place(self, node: Any, value: Any, quoted: bool = False) -> Y:
        mark = node.start_mark
        return Y(value, self.file, mark.line + 1, mark.column + 1, quoted)

    def unread(self, node: Any, message: str) -> Y:
        """Report ``node`` as text that is not a value; return its place, ``reported``."""
        at = self.place(node, None, getattr(node, "style", None) in ("'", '"'))
        self.problems.add(at, message)
        return Y(None, at.file, at.line, at.column, at.quoted, reported=True)

    def text(self, node: Any) -> Y:
        """Return a scalar as its text, with the place of each of its characters."""
        mark = node.start_mark
        quoted = node.style in ("'", '"')
        positions = scalar_positions(node)
        return Y(node.value, self.file, mark.line + 1, mark.column + 1, quoted, positions)

    def value(self, node: Any, text: bool = False, typed: bool = False) -> Y:
        """Return ``node`` as a ``Y``.

        ``text``: a scalar keeps its source text. ``typed``: inside ``update:``, whose
        values are state values, so no key there makes its value text.
        """
        import yaml

        if node.tag == _ALIAS:
            return self.unread(
                node, "YAML aliases (*name) are not allowed in a manifest; repeat the value"
            )
        tag = node.tag[len(_PLAIN) :] if node.tag.startswith(_PLAIN) else node.tag
        if isinstance(node, yaml.ScalarNode) and tag in _SCALARS:
            if text:
                return self.text(node)
            return self._scalar(node, tag)
        if isinstance(node, yaml.SequenceNode) and tag == "seq":
            return self.place(node, [self.value(item, typed=typed) for item in node.value])
        if isinstance(node, yaml.MappingNode) and tag == "map":
            return self._mapping(node, typed)
        return self.unread(
            node,
            f"the tag {node.tag!r} is not allowed: a manifest holds plain strings, numbers, "
            f"true/false, null, lists and mappings, and names Python code only by import path"
            f"{_bang_hint(': ' + node.tag)}",
        )

    def _scalar(self, node: Any, tag: str) -> Y:
        import yaml

        quoted = node.style in ("'", '"')
        if tag in ("str", "timestamp"):  # a date stays the text it was written as
            return self.place(node, node.value, quoted)
        # Only the plain scalar tags reach here, so only their safe constructors run.
        constructor = yaml.constructor.SafeConstructor()
        try:
            value = constructor.construct_object(node, deep=True)
        except (ValueError, KeyError, TypeError, OverflowError, yaml.YAMLError):
            # ``!!int abc``, ``!!bool maybe``, an integer past Python's 4,300 digits.
            return self.unread(node, _unreadable(node.value, tag))
        return self.place(node, value, quoted)

    def _mapping(self, node: Any, typed: bool) -> Y:
        import yaml

        out: dict[str, Y] = {}
        for key_node, value_node in node.value:
            # A key is its text: 'on' in {on: [...]} stays a key, not YAML 1.1's true.
            # Before the key is read: its merge tag is no tag a value may have.
            merge = isinstance(key_node, yaml.ScalarNode) and key_node.value == "<<"
            if merge or key_node.tag == "tag:yaml.org,2002:merge":
                self.problems.add(
                    self.place(key_node, "<<"),
                    "merge keys (<<) are not allowed in a manifest; write the keys out",
                )
                continue
            key = self.value(key_node, text=True)
            if not isinstance(key.value, str) or not isinstance(key_node, yaml.ScalarNode):
                self.problems.add(key, f"a key must be a string, got {key.value!r}")
                continue
            if key.value in out:
                first = out[key.value]
                self.problems.add(
                    key,
                    f"the key '{key.value}' is given twice (first at line {first.line}); keep one",
                )
                continue
            text = not typed and key.value in TEXT_KEYS
            out[key.value] = self.value(value_node, text, typed or key.value == "update")
        return self.place(node, out)


def scalar_positions(node: Any) -> tuple[tuple[int, int], ...] | None:
    """Return the 1-based line and column in the source of each character of a scalar.

    A scalar's value is not its source text: quotes, escapes (``\\"``, ``''``), the
    indentation of a block (``|``, ``>``) and the folding of its lines into spaces lie
    between them. The value is walked along the source, each character matched to the
    source character that gives it, so a condition's error points at the column where
    its text was written. ``None`` when the two cannot be matched (an explicit
    indentation indicator, text PyYAML did not keep); the caller then places the whole
    scalar.
    """
    start, end = node.start_mark, node.end_mark
    buffer = getattr(start, "buffer", None)
    if not isinstance(buffer, str):
        return None
    src = buffer[start.index : end.index]
    style = node.style
    j, indent = 0, None
    if style in ("|", ">"):
        header, _, body = src.partition("\n")
        if any(c.isdigit() for c in header.split("#")[0]):
            return None  # an explicit indentation indicator: rare, not mapped
        j = len(header) + 1
        first = next((line for line in body.split("\n") if line.strip()), "")
        indent = len(first) - len(first.lstrip(" "))
    elif style in ("'", '"'):
        j = 1
    found: list[int] = []
    for ch in node.value:
        while True:
            if j >= len(src):
                return None
            c = src[j]
            if style == '"' and c == "\\":
                nxt = src[j + 1 : j + 2]
                if nxt == "\n":  # an escaped line break: no character of the value
                    j = _skip_blanks(src, j + 2, None)
                    continue
                found.append(j)
                j += {"x": 4, "u": 6, "U": 10}.get(nxt, 2)
                break
            if style == "'" and src.startswith("''", j) and ch == "'":
                found.append(j)
                j += 2
                break
            if c == ch:
                found.append(j)
                j = _skip_blanks(src, j + 1, indent) if c == "\n" else j + 1
                break
            if c == "\n" and ch == " ":  # a line break folded into a space
                found.append(j)
                j = _skip_blanks(src, j + 1, indent)
                break
            if c in " \t\r\n":  # indentation, or a break folding drops
                j = _skip_blanks(src, j + 1, indent) if c == "\n" else j + 1
                continue
            return None
    return tuple(_line_column(src, start, at) for at in found)


def _skip_blanks(src: str, j: int, indent: int | None) -> int:
    """Skip a new line's indentation: ``indent`` spaces in a block, all blanks elsewhere."""
    if indent is not None:
        stop = j
        while stop < len(src) and stop - j < indent and src[stop] == " ":
            stop += 1
        return stop
    while j < len(src) and src[j] in " \t":
        j += 1
    return j


def _line_column(src: str, start: Any, at: int) -> tuple[int, int]:
    before = src[:at]
    breaks = before.count("\n")
    if not breaks:
        return start.line + 1, start.column + 1 + at
    return start.line + 1 + breaks, at - before.rindex("\n")


def _unreadable(text: str, tag: str) -> str:
    digits = text.lstrip("+-").replace("_", "")
    if tag == "int" and digits.isdigit() and len(digits) > 4300:
        return (
            f"an integer of more than 4,300 digits ({len(digits):,}) cannot be read; "
            f"write a smaller number, or quote it to keep it as text"
        )
    shown = text if len(text) <= 40 else text[:37] + "..."
    return (
        f"{shown!r} is not a valid !!{tag}; write a {_KINDS.get(tag, tag)}, or remove the "
        f"tag (quote the value to keep it as text)"
    )


_KINDS = {"int": "whole number", "float": "number", "bool": "true or false"}
