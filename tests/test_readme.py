"""README.md is also the package's page on PyPI, where a relative link leads nowhere: its
links are absolute, and those into this repository name files and headings that exist."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "https://github.com/nodestep-ai/nodestep/"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links() -> list[str]:
    return _LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def _anchors(page: Path) -> set[str]:
    """The ids GitHub gives a Markdown page's headings: lower case, words joined by '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_readme_link_is_absolute() -> None:
    relative = [link for link in _links() if not re.match(r"https?://", link)]
    assert relative == [], "write them as " + REPOSITORY + "blob/main/PATH"


def test_every_readme_link_into_the_repository_names_what_is_there() -> None:
    ours = [link for link in _links() if link.startswith(REPOSITORY)]
    assert ours, "the README links to its docs"
    for link in ours:
        match = re.fullmatch(r"(blob|tree)/main/([^#]+)(?:#(.+))?", link[len(REPOSITORY) :])
        assert match, f"{link}: link to blob/main/FILE or tree/main/FOLDER"
        kind, path, anchor = match.groups()
        target = ROOT / path
        assert target.is_file() if kind == "blob" else target.is_dir(), link
        if anchor:
            assert anchor in _anchors(target), link


def test_the_package_metadata_names_the_repository_the_links_lead_to() -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert urls["Repository"] + "/" == REPOSITORY
    assert all(url.startswith(REPOSITORY.rstrip("/")) for url in urls.values())
