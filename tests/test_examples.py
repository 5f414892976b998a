"""Run every examples/*.py script the way a user would.

Each script runs in a subprocess with this interpreter, from an empty temporary
directory, with deprecation warnings as errors (examples use only current import paths),
and must exit with code 0 within 60 seconds. If ``examples/<name>.out``
exists, the script's stdout must equal that file exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(EXAMPLES_DIR.glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[script.name for script in SCRIPTS])
def test_example(script: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{script.name} exited with {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    )
    expected = script.with_suffix(".out")
    if expected.exists():
        assert proc.stdout == expected.read_text(encoding="utf-8")
