"""``nodestep serve`` and ``nodestep sandbox`` without their extra: one line, one command.

The command is quoted (``pip install 'nodestep[serve]'``) so that it runs as printed in zsh,
where an unquoted ``[...]`` is a glob that matches no file.
"""

from __future__ import annotations

import sys

import pytest
from cli_helpers import invoke


@pytest.mark.parametrize(
    ("command", "package", "extra"),
    [("serve", "nodestep.serve", "serve"), ("sandbox", "nodestep.sandbox", "sandbox")],
)
def test_a_missing_server_extra_names_its_quoted_command_once(
    monkeypatch: pytest.MonkeyPatch, command: str, package: str, extra: str
) -> None:
    # Import the package afresh with starlette missing, as where the extra is not installed
    # (None in sys.modules makes its import fail); monkeypatch puts the real ones back.
    monkeypatch.setitem(sys.modules, "starlette", None)
    monkeypatch.delitem(sys.modules, package, raising=False)
    result = invoke([command, "blog:graph"])
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert f"pip install 'nodestep[{extra}]'" in line
    assert line.count("pip install") == 1, line
