"""The pieces of nodestep's HTML views: a titled panel, a field list, a table, a value.

Why these rules: a view is shown in notebooks, which sanitise HTML of untrusted
notebooks, and may be put in any page. So there is no script, no stylesheet and nothing
fetched (every style is inline), and every text that comes from data goes through
``escape`` here: callers pass HTML only as made by these functions. Colours are set
for both text and background, so a view reads the same in a dark theme.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from nodestep._display.text import short_repr

__all__ = ["code", "escape", "fields", "note", "panel", "status", "table", "text"]

_PANEL = (
    "font-family: Helvetica, Arial, sans-serif; font-size: 13px; color: #1f2933; "
    "background: #ffffff; border: 1px solid #d0d7de; border-radius: 6px; "
    "padding: 8px 10px; margin: 4px 0; display: inline-block; max-width: 100%; "
    "overflow-x: auto; text-align: left"
)
_TITLE = "font-weight: 600; margin-bottom: 6px"
_CELL = "padding: 2px 10px 2px 0; border-bottom: 1px solid #eaeef2; vertical-align: top"
_HEAD = f"{_CELL}; font-weight: 600; border-bottom: 1px solid #afb8c1; text-align: left"
_LABEL = f"{_CELL}; color: #57606a; white-space: nowrap"
_CODE = "font-family: Menlo, Consolas, monospace; font-size: 12px; white-space: pre-wrap"
_NOTE = "color: #57606a; margin-top: 6px; font-size: 12px"
_STATUS = {
    "completed": "#1a7f37",
    "idle": "#1a7f37",
    "interrupted": "#9a6700",
    "paused": "#9a6700",
    "running": "#0969da",
    "failed": "#cf222e",
    "blocked": "#cf222e",
}


# what html.escape(quote=True) replaces; written out, because importing the html package
# (and its table of entities) would be most of this module's import time
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def escape(value: str) -> str:
    """Return ``value`` with ``& < > " '`` escaped, as ``html.escape`` does."""
    return value.translate(_ESCAPES)


def text(value: str) -> str:
    """Return ``value`` as HTML text (escaped)."""
    return escape(value)


def code(value: Any, width: int = 120) -> str:
    """Return a short ``repr`` of ``value`` as escaped, monospaced HTML."""
    return f'<code style="{_CODE}">{escape(short_repr(value, width))}</code>'


def status(value: str) -> str:
    """Return a status (``completed``, ``paused``, ...) in its colour."""
    colour = _STATUS.get(value, "#57606a")
    return f'<span style="color: {colour}; font-weight: 600">{escape(value)}</span>'


def note(html: str) -> str:
    """Return a small grey line under a view (``html`` made by these functions)."""
    return f'<div style="{_NOTE}">{html}</div>'


def fields(rows: Iterable[tuple[str, str]]) -> str:
    """Return a two-column list: each label (text) with its value (HTML)."""
    body = "".join(
        f'<tr><td style="{_LABEL}">{escape(label)}</td><td style="{_CELL}">{value}</td></tr>'
        for label, value in rows
    )
    return f'<table style="border-collapse: collapse">{body}</table>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Return a table: ``headers`` as text, each row's cells as HTML."""
    head = "".join(f'<th style="{_HEAD}">{escape(h)}</th>' for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td style="{_CELL}">{cell}</td>' for cell in row) + "</tr>"
        for row in rows
    )
    return (
        f'<table style="border-collapse: collapse"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def panel(title: str, *parts: str, kind: str = "") -> str:
    """Return a titled panel holding ``parts`` (HTML) one under another.

    Args:
        title: The panel's title (text).
        parts: Its contents, made by these functions.
        kind: A class name for the panel (``nodestep-history``), so pages and tests can
            find it.
    """
    name = f"nodestep-view {kind}".strip()
    return (
        f'<div class="{escape(name)}" style="{_PANEL}"><div style="{_TITLE}">{escape(title)}'
        f"</div>{''.join(parts)}</div>"
    )
