"""Language bundles: text in several languages, language keys at any depth.

A bundle is a string (English), or a mapping in which language codes may appear at any
level: ``{system: {en: ..., ru: ...}}`` and ``{en: {system: ...}, ru: {system: ...}}``
say the same. ``normalize`` turns either into one tree per language; ``in_language``
picks a language, taking each key it lacks from ``en`` (the fallback), key by key, so a
Russian bundle that only translates ``system`` still has the English ``notes``.
"""

from __future__ import annotations

from typing import Any

from nodestep._errors import GraphConfigError

__all__ = ["FALLBACK", "LANGUAGES", "BundleError", "flatten", "in_language", "normalize"]

FALLBACK = "en"

LANGUAGES = frozenset(
    {"en", "ru", "zh", "fr", "de", "es", "it", "pt", "ja", "ko", "uk", "pl", "nl", "tr"}
    | {"ar", "hi", "sv", "cs"}
)
"""The keys read as language codes. A key outside this set is an ordinary key, so a bundle
may hold ``notes`` or ``intro`` without their being taken for languages."""


class BundleError(GraphConfigError):
    """A bundle whose shape cannot be read (a language holds text and keys at once)."""


def normalize(value: Any) -> dict[str, Any]:
    """Return ``value`` as ``{language: text or tree}``.

    Text outside any language key is English. ``{en: 'a', notes: {ru: 'b'}}`` becomes
    ``{'en': 'a', 'ru': {'notes': 'b'}}`` only if that is consistent: a language that
    holds text at its top cannot also hold keys, and that is a ``BundleError``.

    Raises:
        BundleError: the same language holds text and keys at one place.
    """
    out: dict[str, Any] = {}
    _place(value, None, (), out)
    return out


def _place(value: Any, lang: str | None, path: tuple[str, ...], out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in LANGUAGES:
                if lang is not None and key != lang:
                    raise BundleError(
                        f"language '{key}' is written inside language '{lang}'"
                        f"{_at(path)}; put each language's text under its own key"
                    )
                _place(item, key, path, out)
            else:
                _place(item, lang, (*path, str(key)), out)
        return
    language = lang or FALLBACK
    if not path:
        if isinstance(out.get(language), dict):
            raise BundleError(f"language '{language}' holds both text and keys")
        out[language] = value
        return
    tree = out.setdefault(language, {})
    if not isinstance(tree, dict):
        raise BundleError(f"language '{language}' holds both text and keys{_at(path)}")
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
        if not isinstance(tree, dict):
            raise BundleError(f"'{'.'.join(path)}' in language '{language}' is text and keys")
    tree[path[-1]] = value


def _at(path: tuple[str, ...]) -> str:
    return f" at '{'.'.join(path)}'" if path else ""


def in_language(bundle: dict[str, Any], lang: str) -> Any:
    """Return the bundle in ``lang``, each key it lacks taken from ``en``.

    A language the bundle does not have at all reads as English. Returns ``None`` when
    neither has anything.
    """
    own = bundle.get(lang)
    fallback = bundle.get(FALLBACK)
    if lang == FALLBACK or own is None:
        return fallback
    if isinstance(own, dict) and isinstance(fallback, dict):  # key by key
        return _merged(fallback, own)
    return own


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(below, dict) and isinstance(value, dict):
            out[key] = _merged(below, value)
        else:
            out[key] = value
    return out


def flatten(value: Any, prefix: str = "") -> str:
    """Return text for a bundle's value: text as it is, a tree as ``path: value`` lines."""
    if not isinstance(value, dict):
        return "" if value is None else str(value)
    lines = []
    for key, item in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        lines.append(flatten(item, name) if isinstance(item, dict) else f"{name}: {item}")
    return "\n".join(lines)
