"""The public surface: every name in nodestep.__all__ is importable and documented."""

from __future__ import annotations

import importlib
import inspect

import pytest

import nodestep


@pytest.mark.parametrize("name", nodestep.__all__)
def test_public_name_is_importable_from_the_package(name):
    assert getattr(nodestep, name) is not None
    module = importlib.import_module("nodestep")
    exec(f"from nodestep import {name}", {})
    assert getattr(module, name) is getattr(nodestep, name)


@pytest.mark.parametrize("name", nodestep.__all__)
def test_public_name_has_a_docstring(name):
    doc = inspect.getdoc(getattr(nodestep, name))
    assert doc and doc.strip(), f"nodestep.{name} has no docstring"


def test_public_names_are_listed_once():
    assert len(set(nodestep.__all__)) == len(nodestep.__all__)


def test_star_import_gives_every_public_name():
    namespace: dict[str, object] = {}
    exec("from nodestep import *", namespace)
    missing = [name for name in nodestep.__all__ if name not in namespace]
    assert missing == []


def test_the_package_has_a_version_and_a_docstring():
    assert isinstance(nodestep.__version__, str)
    assert nodestep.__doc__


def test_an_unknown_attribute_raises_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="module 'nodestep' has no attribute 'Nope'"):
        nodestep.Nope  # noqa: B018


def test_every_public_error_derives_from_nodestep_error():
    for name in nodestep.__all__:
        obj = getattr(nodestep, name)
        if isinstance(obj, type) and issubclass(obj, BaseException) and name != "GraphInterrupt":
            assert issubclass(obj, nodestep.NodestepError), name


def test_every_public_name_appears_on_a_docs_page():
    import pathlib
    import re

    docs = pathlib.Path(__file__).resolve().parents[1] / "docs"
    text = "\n".join(page.read_text() for page in docs.glob("*.md"))
    missing = [name for name in nodestep.__all__ if not re.search(rf"\b{name}\b", text)]
    assert missing == []
