"""Language bundles: text in several languages, language keys at any depth.

A bundle is a string (English), or a mapping in which language codes may appear at any
level: ``{system: {en: ..., ru: ...}}`` and ``{en: {system: ...}, ru: {system: ...}}``
say the same. ``normalize`` turns either into one tree per language; ``in_language``
picks a language, taking each key it lacks from ``en`` (the fallback), key by key, so a
Russian bundle that only translates ``system`` still has the English ``notes``.

A null (``ru: ~``, or ``{ notes }``, YAML's flow mapping of ``notes`` to null) is a key
written without text, and reads as if the key were not written: ``normalize`` leaves it
out, so that language takes the key from English, and nothing of it reaches a prompt.
Liman 0.1.0 loads such a bundle too (its ``normalize_dict`` keeps the null), and where it
falls back it takes a null as missing (a description's ``get(lang) or get("en")``);
dropping the null here gives it that meaning at every place a bundle is read, ``system``
included, rather than leaving a ``None`` each reader must remember.
"""

from __future__ import annotations

from typing import Any

from nodestep._errors import GraphConfigError

__all__ = [
    "FALLBACK",
    "LANGUAGES",
    "BundleError",
    "flatten",
    "in_language",
    "language_of",
    "normalize",
]

FALLBACK = "en"

LANGUAGES = frozenset(
    {"en", "ru", "zh", "fr", "de", "es", "it", "pt", "ja", "ko", "uk", "pl", "nl", "tr"}
    | {"ar", "hi", "sv", "cs"}
)
"""The keys read as language codes. A key outside this set is an ordinary key, so a bundle
may hold ``notes`` or ``intro`` without their being taken for languages."""


class BundleError(GraphConfigError):
    """A bundle whose shape cannot be read (a language holds text and keys at once).

    Attributes:
        path: The keys, as written, from the bundle to the culprit, so a reader that
            knows where the bundle was written can point at the culprit's line.
    """

    def __init__(self, message: str, path: tuple[str, ...]) -> None:
        super().__init__(message)
        self.path = path


def normalize(value: Any) -> dict[str, Any]:
    """Return ``value`` as ``{language: text or tree}``.

    Text outside any language key is English. ``{en: 'a', notes: {ru: 'b'}}`` becomes
    ``{'en': 'a', 'ru': {'notes': 'b'}}`` only if that is consistent: a language that
    holds text at its top cannot also hold keys, and that is a ``BundleError``. A null
    is left out, as if its key were not written (a list keeps its other items).

    Raises:
        BundleError: the same language holds text and keys at one place.
    """
    out: dict[str, Any] = {}
    _place(value, None, (), (), out)
    return out


def _place(
    value: Any,
    lang: str | None,
    path: tuple[str, ...],
    written: tuple[str, ...],
    out: dict[str, Any],
) -> None:
    """Place ``value`` in ``out`` under ``lang`` and ``path`` (its keys, languages left
    out); ``written`` is its keys as written, which a ``BundleError`` carries."""
    if value is None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            here = (*written, str(key))
            if key in LANGUAGES:
                if lang is not None and key != lang:
                    raise BundleError(
                        f"language '{key}' is written inside language '{lang}'"
                        f"{_at(path)}; put each language's text under its own key",
                        here,
                    )
                _place(item, key, path, here, out)
            else:
                _place(item, lang, (*path, str(key)), here, out)
        return
    language = lang or FALLBACK
    value = _without_nulls(value)
    if not path:
        if isinstance(out.get(language), dict):
            raise BundleError(f"language '{language}' holds both text and keys", written)
        out[language] = value
        return
    tree = out.setdefault(language, {})
    if not isinstance(tree, dict):
        raise BundleError(f"language '{language}' holds both text and keys{_at(path)}", written)
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
        if not isinstance(tree, dict):
            raise BundleError(
                f"'{'.'.join(path)}' in language '{language}' is text and keys", written
            )
    tree[path[-1]] = value


def _without_nulls(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_nulls(v) for v in value if v is not None]
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _at(path: tuple[str, ...]) -> str:
    return f" at '{'.'.join(path)}'" if path else ""


def language_of(lang: Any) -> str:
    """Return the language a step's ``context["lang"]`` picks: one of ``LANGUAGES``.

    ``ru``, ``RU``, ``ru-RU`` and ``ru_RU`` all pick ``ru``: a browser's language and an
    ``Accept-Language`` header carry a region, and the bundles are keyed by the language
    alone (BCP 47's primary subtag). Anything else, ``None`` and unknown codes included,
    is English, the fallback. Mapping every value into this fixed set also bounds what
    is made once per language, whatever a client sends.
    """
    if not isinstance(lang, str):
        return FALLBACK
    primary = lang.strip().replace("_", "-").split("-", 1)[0].lower()
    return primary if primary in LANGUAGES else FALLBACK


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
