"""A target that names nothing loadable says what it named and what to do: for a module
that fails to import, a command that runs and shows the traceback, in one sentence; for a
class or a node, no advice to call it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nodestep import GraphConfigError
from nodestep.cli import load_target


def test_a_file_that_fails_to_import_names_a_command_that_shows_the_traceback(
    tmp_path: Path,
) -> None:
    # It said `python -c 'import /tmp/.../broken.py'`, which is no Python.
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no config here.')\n")
    with pytest.raises(GraphConfigError) as caught:
        load_target(f"{broken}:graph")
    message = str(caught.value)
    command = f"""python -c 'import runpy; runpy.run_path("{broken}")'"""
    assert message == (
        f"Target '{broken}:graph': importing '{broken}' raised RuntimeError: no config here. "
        f"Fix that module (run `{command}` to see the traceback)."
    )
    shown = subprocess.run(
        [sys.executable, "-c", f'import runpy; runpy.run_path("{broken}")'],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "RuntimeError: no config here." in shown.stderr


def test_a_module_that_fails_to_import_ends_its_sentence_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "half_done.py").write_text("raise ValueError('the flow is not ready.')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GraphConfigError) as caught:
        load_target("half_done:graph")
    assert str(caught.value) == (
        "Target 'half_done:graph': importing 'half_done' raised ValueError: the flow is not "
        "ready. Fix that module (run `python -c 'import half_done'` to see the traceback)."
    )


def test_a_class_or_a_node_named_as_a_target_is_not_told_to_be_called(tmp_path: Path) -> None:
    # Both are callable, and the hint said "call it and name the result"; the class was
    # named by its metaclass, "ModelMetaclass".
    flows = tmp_path / "flows.py"
    flows.write_text(
        "from nodestep import BaseState, node\n"
        "class S(BaseState):\n"
        "    n: int = 0\n"
        "@node\n"
        "def step(state: S) -> dict:\n"
        "    return {}\n"
    )
    with pytest.raises(GraphConfigError) as caught:
        load_target(f"{flows}:S")
    assert str(caught.value) == (
        f"Target '{flows}:S' is the class S, not a nodestep Graph or Agent."
    )
    with pytest.raises(GraphConfigError) as caught:
        load_target(f"{flows}:step")
    assert str(caught.value) == (
        f"Target '{flows}:step' is the node 'step', not a nodestep Graph or Agent (name the "
        f"graph it is part of)."
    )
