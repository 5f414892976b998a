"""The pages a new user reads first agree with the package: every extra, every face."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from test_public_faces import FACES

ROOT = Path(__file__).resolve().parent.parent
WORDS = {12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen"}


def _first_cells(page: str) -> list[str]:
    """The first cell of each row of the page's tables, without the header rows."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    return [cell for cell in rows if not cell.startswith("---")]


def test_the_install_page_lists_every_extra_of_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    listed = {name for cell in _first_cells("install.md") for name in re.findall(r"`(\w+)`", cell)}
    assert sorted(extras - listed) == []


def test_the_imports_page_lists_every_face_and_counts_them() -> None:
    listed = [re.sub(r"`", "", cell) for cell in _first_cells("imports.md")]
    faces = [cell for cell in listed if cell.startswith("nodestep") and " " not in cell]
    assert sorted(faces) == sorted(FACES)
    text = (ROOT / "docs" / "imports.md").read_text(encoding="utf-8")
    assert f"one of {WORDS[len(FACES)]} modules" in text
