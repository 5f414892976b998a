"""``python -m nodestep``: the same command line as the ``nodestep`` script, in a real
process, for where the script is not on the PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from cli_helpers import run_script, write_blog_thread

pytestmark = pytest.mark.slow  # each test starts a Python process or two

PYTHON_M = (sys.executable, "-m", "nodestep")


def test_python_m_nodestep_runs_the_command_line_as_the_script_does(tmp_path: Path) -> None:
    write_blog_thread(f"sqlite://{tmp_path}/history.db", answer="publish")
    args = ["history", "blog-1", "--store", "history.db"]
    by_module = run_script(args, cwd=tmp_path, program=PYTHON_M)
    by_script = run_script(args, cwd=tmp_path)
    assert by_module.code == 0, by_module.err
    assert "thread blog-1, branch main" in by_module.out
    assert by_module.out == by_script.out


def test_python_m_nodestep_exits_with_the_code_of_the_command(tmp_path: Path) -> None:
    ran = run_script(["history", "blog-1", "--store", "nowhere.db"], cwd=tmp_path, program=PYTHON_M)
    assert ran.code == 1
    assert ran.err.startswith("nodestep history: no store at")
    assert run_script(["nosuch"], cwd=tmp_path, program=PYTHON_M).code == 2


def test_python_m_nodestep_without_click_and_rich_names_the_extra(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "click"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no click here', name='click')\n")
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    ran = run_script(["threads"], cwd=tmp_path, env={"PYTHONPATH": path}, program=PYTHON_M)
    assert ran.code == 1
    assert ran.err == "nodestep: the command line needs click: pip install 'nodestep[cli]'\n"
