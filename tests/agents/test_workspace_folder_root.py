"""A ``FolderWorkspace`` root that cannot be a folder is refused with the fix that applies.

A file where the root goes is refused whether or not ``create=True`` is given (no folder
can be made there, and the message does not suggest it could); a root that cannot be
made, or a root that is no path, is a ``GraphConfigError`` too, never an ``OSError``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import GraphConfigError
from nodestep.agents import FolderWorkspace


@pytest.mark.parametrize("create", [False, True])
def test_a_file_as_the_root_is_refused_whatever_create_says(tmp_path: Path, create: bool) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("kept")
    with pytest.raises(GraphConfigError) as caught:
        FolderWorkspace(file, create=create)
    assert str(caught.value) == (
        f"FolderWorkspace root {str(file)!r} is a file, not a folder; give the path of a "
        f"folder, or of one to make with create=True."
    )
    assert file.read_text() == "kept"


def test_a_root_that_cannot_be_made_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("kept")
    root = tmp_path / "notes.txt" / "space"
    with pytest.raises(GraphConfigError, match=r"cannot make the root .*space'"):
        FolderWorkspace(root, create=True)


def test_a_root_that_is_no_path_is_refused() -> None:
    with pytest.raises(GraphConfigError, match="takes the folder's path as a str or a Path"):
        FolderWorkspace(3)  # type: ignore[arg-type]
