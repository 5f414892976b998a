"""Language bundles: language keys at any depth, English as the fallback key by key."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep.agents._specs.bundles import BundleError, flatten, in_language, normalize

LANGS = ["en", "ru", "de"]
KEYS = st.sampled_from(["system", "notes", "intro", "bye"])
TEXT = st.text(min_size=1, max_size=5)


def test_language_keys_inside_or_outside_say_the_same():
    inside = {"system": {"en": "Hi", "ru": "Привет"}, "notes": {"intro": {"de": "Hallo"}}}
    outside = {
        "en": {"system": "Hi"},
        "ru": {"system": "Привет"},
        "de": {"notes": {"intro": "Hallo"}},
    }
    assert normalize(inside) == normalize(outside)


def test_plain_text_is_english():
    assert normalize("Find a user") == {"en": "Find a user"}
    assert normalize({"system": "Hi"}) == {"en": {"system": "Hi"}}


def test_a_missing_key_falls_back_to_english_key_by_key():
    bundle = normalize(
        {
            "system": {"en": "You help."},
            "notes": {"intro": {"en": "Hello", "ru": "Привет"}, "bye": {"de": "Tschüss"}},
        }
    )
    assert in_language(bundle, "ru") == {"system": "You help.", "notes": {"intro": "Привет"}}
    assert in_language(bundle, "de") == {
        "system": "You help.",
        "notes": {"intro": "Hello", "bye": "Tschüss"},
    }
    assert in_language(bundle, "fr") == in_language(bundle, "en")


def test_a_language_inside_another_is_refused():
    with pytest.raises(BundleError, match="language 'ru' is written inside language 'en'"):
        normalize({"en": {"ru": "x"}})


def test_a_null_is_no_text_and_its_language_falls_back_to_english():
    # Liman's poc.mdx writes `notes: {en: { notes }}`: YAML's mapping of notes to null.
    bundle = normalize(
        {
            "system": {"en": "You help.", "ru": None},
            "notes": {"en": {"notes": None}},
            "intro": {"en": "Hi", "ru": "Привет"},
        }
    )
    assert bundle == {"en": {"system": "You help.", "intro": "Hi"}, "ru": {"intro": "Привет"}}
    assert in_language(bundle, "ru") == {"system": "You help.", "intro": "Привет"}


def test_a_bundle_of_nulls_is_empty_and_a_list_keeps_its_other_items():
    assert normalize(None) == normalize({"en": None}) == normalize({"system": {}}) == {}
    assert normalize({"en": ["a", None, "b"]}) == {"en": ["a", "b"]}


def test_a_bundle_error_carries_the_keys_of_its_culprit_as_written():
    with pytest.raises(BundleError) as caught:
        normalize({"system": {"en": {"intro": {"ru": "x"}}}})
    assert caught.value.path == ("system", "en", "intro", "ru")
    with pytest.raises(BundleError, match="holds both text and keys") as caught:
        normalize({"en": "text", "notes": {"x": "y"}})
    assert caught.value.path == ("notes", "x")


def test_a_tree_flattens_to_path_lines():
    assert (
        flatten({"user": {"name": "Ada", "age": 3}, "x": "y"})
        == "user.name: Ada\nuser.age: 3\nx: y"
    )


@given(st.dictionaries(KEYS, st.dictionaries(st.sampled_from(LANGS), TEXT, min_size=1), min_size=1))
def test_every_key_has_a_value_in_every_language_that_english_has(tree: dict[str, Any]):
    bundle = normalize(tree)
    english = in_language(bundle, "en") or {}
    for lang in [*LANGS, "fr"]:
        picked = in_language(bundle, lang) or {}
        assert set(english) <= set(picked)
        for key, per_lang in tree.items():
            if lang in per_lang:
                assert picked[key] == per_lang[lang]
            elif "en" in per_lang:
                assert picked[key] == per_lang["en"]
