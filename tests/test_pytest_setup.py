"""The repository's pytest setup (conftest.py at its root): what a run of the wrong path, or
of chosen tests, says with the suite's worker processes on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # each runs pytest in a new process


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_path_that_does_not_exist_is_refused_by_name() -> None:
    done = _pytest("tests/no_such_tests.py")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "file or directory not found: tests/no_such_tests.py" in done.stderr


def test_a_test_id_that_names_no_test_is_refused_by_name() -> None:
    done = _pytest("tests/test_ids.py::test_no_such_test")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "not found: " in done.stderr and "test_no_such_test" in done.stderr


def test_chosen_tests_run_in_this_process_and_a_whole_file_in_workers() -> None:
    chosen = _pytest("tests/test_ids.py::test_new_id_is_a_canonical_uuid4")
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    assert "1 passed" in chosen.stdout and "bringing up nodes" not in chosen.stdout
    whole = _pytest("tests/test_ids.py")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "bringing up nodes" in whole.stdout
