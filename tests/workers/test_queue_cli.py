"""The worker command line: its errors, and the schema command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nodestep.workers.__main__ import main


def test_worker_command_names_a_bad_queue_url(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["worker", "sqlite:///x.db"]) == 2
    assert "pass a postgresql:// URL, got 'sqlite:///x.db'" in capsys.readouterr().err


def test_worker_command_refuses_a_graph_it_cannot_import(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["worker", "postgresql://nobody@127.0.0.1:1/x", "--graph", "nope:g"]) == 2
    assert "Cannot import module 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_module_has_a_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nodestep.workers", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "worker" in out.stdout and "schema" in out.stdout
