"""An OpenAPI document read from a dict or a file: parsed as JSON or YAML, checked for depth.

``openapi_tools`` takes the document in any of these forms; this module turns it into the
mapping the tools are read from, or says why it cannot.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from nodestep._errors import GraphConfigError
from nodestep._state.json import first_line

__all__ = ["load_document"]


def load_document(spec: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    """Return the OpenAPI document ``spec`` names: a dict as it is, or a file parsed.

    Raises:
        GraphConfigError: the file cannot be read or parsed, nests too deeply, or the
            document has no ``paths`` object.
    """
    if isinstance(spec, Mapping):
        document: Any = spec
    elif isinstance(spec, str | os.PathLike):
        path = Path(spec)
        try:
            text = path.read_bytes()
        except OSError as error:
            raise GraphConfigError(
                f"openapi_tools could not read the OpenAPI document {str(path)!r}: "
                f"{error.strerror}. Pass the path of a .json or .yaml file, or the parsed dict."
            ) from None
        document = _parse(text, path)
        named = f"the document {path.name}"
    else:
        raise GraphConfigError(
            f"openapi_tools takes an OpenAPI document as a dict or a file path, got "
            f"{type(spec).__name__}."
        )
    if not isinstance(document, Mapping) or not isinstance(document.get("paths"), Mapping):
        raise GraphConfigError(
            f"openapi_tools got {named if not isinstance(spec, Mapping) else 'a document'} "
            f"without a 'paths' object; pass an OpenAPI 3 document (openapi: 3.x, "
            f"paths: {{...}})."
        )
    return document


# Deeper than any real OpenAPI document (its schemas are bounded by MAX_DEPTH, 64).
_DOCUMENT_DEPTH = 100


def _parse(text: bytes, path: Path) -> Any:
    """Return the parsed document of file ``path``, refusing one nested too deeply.

    Why the depth is checked after parsing: whether PyYAML's recursion gives up on a deep
    document depends on the interpreter's recursion limit, which other code may raise; a
    check of our own refuses the same documents whatever that limit is.
    """
    document = _parse_text(text, path)
    if _deeper_than(document, _DOCUMENT_DEPTH):
        raise GraphConfigError(
            f"The OpenAPI document {path.name} nests its values more than "
            f"{_DOCUMENT_DEPTH} deep (or a YAML alias puts a value inside itself); an "
            f"OpenAPI document is far shallower."
        )
    return document


def _deeper_than(value: Any, limit: int) -> bool:
    """Tell whether lists and dicts in ``value`` nest more than ``limit`` deep.

    Without recursion, and once per container: YAML aliases can share one list many times
    (a walk of every path would take exponential time) or put a list inside itself (a
    cycle, which is infinitely deep).
    """
    heights: dict[int, int] = {}  # container id -> how deep it nests, once known
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, leaving = stack.pop()
        children = _children(item)
        if children is None:
            continue
        key = id(item)
        if leaving:
            on_path.discard(key)
            heights[key] = 1 + max((heights.get(id(c), 0) for c in children), default=0)
            if heights[key] > limit:
                return True
            continue
        if key in on_path:
            return True  # a cycle
        if key in heights:
            continue
        on_path.add(key)
        stack.append((item, True))
        stack.extend((child, False) for child in children if _children(child) is not None)
    return False


def _children(item: Any) -> list[Any] | None:
    if isinstance(item, dict):
        return list(item.values())
    if isinstance(item, list):
        return item
    return None


def _parse_text(text: bytes, path: Path) -> Any:
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            yaml = importlib.import_module("yaml")
        except ImportError:
            raise GraphConfigError(
                f"Reading {path.name} needs PyYAML; pip install 'nodestep[yaml]', or pass "
                f"the document as JSON or as a dict."
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:  # a syntax error, or a tag such as !!python/object
            raise GraphConfigError(
                f"The OpenAPI document {path.name} is not YAML that can be read safely: "
                f"{first_line(error)}. Fix it; only plain YAML values are read."
            ) from None
        except RecursionError:  # PyYAML composes nested values by recursion
            raise GraphConfigError(
                f"The OpenAPI document {path.name} nests its values too deeply to read; "
                f"an OpenAPI document is far shallower."
            ) from None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise GraphConfigError(
            f"The OpenAPI document {path.name} is not valid JSON ({error}); fix it, or "
            f"name it .yaml if it is YAML."
        ) from None
