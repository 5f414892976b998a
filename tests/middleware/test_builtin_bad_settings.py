"""Built-in middleware refuses a setting that would silently do nothing, or crash later.

``ToolCallLimit(tool=...)`` limits the calls of the tool of that name: any value that is
not a tool's name would match no call, so the limit would never hold. A skills folder
whose ``SKILL.md`` is not UTF-8 is refused naming the file, as one without a name is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodestep import GraphConfigError
from nodestep.middleware import Skills, ToolCallLimit


@pytest.mark.parametrize("tool", ["", 3, ["search"]])
def test_a_tool_call_limit_on_no_tool_name_is_refused(tool: Any) -> None:
    with pytest.raises(GraphConfigError) as caught:
        ToolCallLimit(run_limit=1, tool=tool)
    message = str(caught.value)
    assert f"got {type(tool).__name__} {tool!r}" in message
    assert "a non-empty str such as 'search', or None" in message
    assert ToolCallLimit(run_limit=1, tool="search").tool_names() == {"search"}


def test_a_skill_file_that_is_not_utf8_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "haiku").mkdir()
    skill = tmp_path / "haiku" / "SKILL.md"
    skill.write_bytes(b"---\nname: haiku\ndescription: Write \xe9 haiku.\n---\nThree lines.\n")
    with pytest.raises(GraphConfigError) as caught:
        Skills(tmp_path)
    assert str(caught.value) == (
        f"{skill} is not UTF-8 text: byte b'\\xe9' at offset 35 does not decode. "
        f"Save the file as UTF-8."
    )
    skill.write_text("---\nname: haiku\ndescription: Write \xe9 haiku.\n---\nThree lines.\n")
    assert list(Skills(tmp_path).skills) == ["haiku"]
