"""MkDocs hooks of the nodestep site (named in mkdocs.yml's ``hooks:``).

Two jobs, both done before Markdown sees a page:

- Fence flags. ``tests/test_docs.py`` reads words after a fence's language
  (```` ```python no-run ````, ``notebook``, ``postgres``) as instructions to the test
  runner. They mean nothing to a reader, and Markdown's fence extensions do not accept a
  bare word there (the block would render as raw text), so the site drops them.
- Reference pages. Each ``reference/<face>.md`` page the nav names and the docs folder
  does not hold is generated as ``::: <face>``, mkdocstrings' directive for the module's
  ``__all__``: adding a public face to the API reference is one nav line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

# An opening fence of a python block followed by flags for the test runner; the flags are
# removed, the language and any {attributes} stay.
_FLAGGED_FENCE = re.compile(
    r"^(?P<head> *(?:`{3,}|~{3,}) *(?:python3?|py))(?P<flags>(?: +[a-z][a-z-]*)+) *$",
    re.MULTILINE,
)
_REFERENCE = re.compile(r"^reference/(?P<face>nodestep(?:\.[a-z_]+)*)\.md$")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Drop the test runner's flags from python fences, so every block renders as code."""
    return _FLAGGED_FENCE.sub(r"\g<head>", markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Generate the reference page of every face the nav names that has no file."""
    for path in _nav_paths(config.nav or []):
        match = _REFERENCE.match(path)
        if match is None or files.get_file_from_path(path) is not None:
            continue
        face = match["face"]
        content = f"# `{face}`\n\n::: {face}\n"
        files.append(File.generated(config, path, content=content))
    return files


def _nav_paths(nav: Any) -> Iterator[str]:
    """Every page path of a nav tree (lists of strings and one-key dicts)."""
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_paths(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_paths(value)
