"""What ``MCPClient`` accepts: its settings, the options of a listing, and the names a
model calls an MCP server's tools by.

Checked when the client is made or the tools listed, so that a wrong value is refused in
nodestep's words, naming the setting, rather than later in the SDK's, or never.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from nodestep._errors import GraphConfigError
from nodestep._numbers import is_finite_number, shown_number

__all__ = ["check_listing", "check_options", "check_texts", "model_name", "refuse_same_name"]

_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX = re.compile(r"[A-Za-z0-9_-]{0,63}")


class Named(Protocol):
    """A tool as ``refuse_same_name`` reads it: its name for a model and for its server."""

    name: str
    server_name: str


def model_name(name: str, prefix: str) -> str:
    """Return the name a model can call a tool by: letters, digits, ``_`` and ``-``."""
    return (prefix + _NOT_NAME.sub("_", name))[:64]


def check_options(timeout: Any, connect_timeout: Any) -> None:
    for label, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
        if not (is_finite_number(value) and value > 0):
            raise GraphConfigError(
                f"MCPClient got {label}={shown_number(value)}; pass a number of seconds above "
                f"0, e.g. 30."
            )


def check_texts(env: Any, headers: Any, name: Any) -> None:
    """Refuse an ``env``, ``headers`` or ``name`` of ``MCPClient`` that is not text.

    Why here: the SDK would refuse them later, in its own words (a pydantic error for
    ``env``, a failed connection for ``headers``), or never, for ``name``.
    """
    examples = {"env": "{'API_KEY': 'k-123'}", "headers": "{'Authorization': 'Bearer k-123'}"}
    for label, given in (("env", env), ("headers", headers)):
        if given is None:
            continue
        # Types only, never values: an env or a header often holds a secret.
        if not isinstance(given, Mapping):
            found = f"is a {type(given).__name__}"
        else:
            bad = [
                (k, v) for k, v in given.items() if not (isinstance(k, str) and isinstance(v, str))
            ]
            if not bad:
                continue
            key, value = bad[0]
            found = f"holds the key {key!r} with a value of type {type(value).__name__}"
            if not isinstance(key, str):
                found = f"holds a key of type {type(key).__name__}"
        raise GraphConfigError(
            f"MCPClient's {label}= {found}; pass a dict of strings to strings, e.g. "
            f"{label}={examples[label]}."
        )
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise GraphConfigError(
            f"MCPClient got name={name!r}; pass the server's name as a non-blank str, or "
            f"leave it out for the name the server gives."
        )


def check_listing(only: Any, prefix: Any) -> None:
    """Refuse an ``only`` or a ``prefix`` of ``MCPClient.tools`` that is not what it takes.

    Why: ``only`` is tested with ``in``, which a str answers for its substrings, and the
    prefix goes into every name a model sees, which must be letters, digits, ``_`` and
    ``-``, 64 at most.
    """
    if only is not None:
        if isinstance(only, str) or not isinstance(only, Sequence):
            raise GraphConfigError(
                f"MCPClient.tools(only=...) takes a list of the server's tool names, such as "
                f"['forecast'], got {type(only).__name__} {only!r}."
            )
        for name in only:
            if not isinstance(name, str):
                raise GraphConfigError(
                    f"MCPClient.tools(only=...) takes tool names as strings, got "
                    f"{type(name).__name__} {name!r} in {list(only)!r}."
                )
        twice = sorted({name for name in only if list(only).count(name) > 1})
        if twice:
            raise GraphConfigError(
                f"MCPClient.tools(only=...) names {', '.join(map(repr, twice))} more than "
                f"once; a model takes one tool of a name: name each once."
            )
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise GraphConfigError(
            f"MCPClient.tools(prefix=...) takes a str of letters, digits, '_' and '-' "
            f"shorter than 64 characters (it begins every name a model sees), such as "
            f"'weather_'; got {type(prefix).__name__} {prefix!r}."
        )


def refuse_same_name(server: str, made: Iterable[Named], tool: Named) -> None:
    """Refuse ``tool`` when a tool already made has its name for a model.

    Raises:
        GraphConfigError: naming both tools as the server lists them.
    """
    same = next((t for t in made if t.name == tool.name), None)
    if same is not None:
        raise GraphConfigError(
            f"MCP server {server!r} lists the tools {same.server_name!r} and "
            f"{tool.server_name!r}, which a model would both call {tool.name!r} (characters "
            f"other than letters, digits, '_' and '-' become '_', and a name is cut at 64 "
            f"characters); leave one out with only=[...], or use a shorter prefix."
        )
