"""scripts/reliability.py, which writes RELIABILITY.md, runs end to end and meets its goals.

The script measures with full counts under ``nox -s reliability``; here it runs with
``--quick`` so that it cannot rot between those runs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "reliability.py"
sys.path.insert(0, str(SCRIPT.parent))

from reliability_checks import (  # noqa: E402
    FilesystemStateStore,
    Goal,
    Section,
    _outcome,
    run,
    write_history,
)

import reliability  # noqa: E402


@pytest.mark.slow
def test_quick_run_writes_every_section_and_meets_every_goal(tmp_path: Path) -> None:
    out = tmp_path / "RELIABILITY.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert re.search(r"^seed: \d+", done.stdout, re.M), done.stdout
    assert len(re.findall(r"^seed of .+: \d+$", done.stdout, re.M)) == 4, done.stdout
    report = out.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", report, re.M)
    assert headings == ["Goals", *reliability.SECTIONS, reliability.SUITE_TITLE]
    for row in ("| date |", "| nodestep | 0.", "| Python | 3.", "| seed |"):
        assert row in report
    goals = re.findall(r"^\| (.+) \| (yes|\*\*NO\*\*) \|$", report, re.M)
    assert len(goals) == 11 and all(met == "yes" for _, met in goals), goals
    assert "11 of 11 goals met." in report
    for figure in ("µs per step", "runs/s", "acknowledged records lost", "files holding"):
        assert figure in report


def test_a_missed_goal_makes_the_exit_status_one(capsys: pytest.CaptureFixture[str]) -> None:
    met = Goal("secrets: files holding a context secret", "0", "0", True)
    missed = Goal("corruption fuzz: other outcomes", "2", "0", False)
    assert reliability.exit_status([Section("a", "", [met])]) == 0
    assert reliability.exit_status([Section("a", "", [met]), Section("b", "", [missed])]) == 1
    assert "goal missed: corruption fuzz: other outcomes: 2 (goal 0)" in capsys.readouterr().err


def test_counts_come_from_the_environment_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODESTEP_CRASHES", "7")
    assert reliability.counts(quick=True)["crashes"] == 7
    assert reliability.counts(quick=False)["crashes"] == 7
    monkeypatch.delenv("NODESTEP_CRASHES")
    assert reliability.counts(quick=False)["crashes"] == 200
    assert reliability.counts(quick=True)["flips"] < reliability.counts(quick=False)["flips"]


def test_the_fuzz_counts_a_silently_different_history_as_a_bad_outcome(tmp_path: Path) -> None:
    # The check can fail: a valid file of another history read without an error is caught.
    write_history(tmp_path / "one.jsonl")
    write_history(tmp_path / "other.jsonl")  # the same runs: other ids and times
    store = FilesystemStateStore(tmp_path / "one.jsonl")
    want = {("t1", "main"): run(lambda: store.read("t1", "main"))}
    run(store.aclose)
    assert _outcome(tmp_path / "one.jsonl", want) == "valid prefix"
    assert _outcome(tmp_path / "other.jsonl", want) == "a different history, read without an error"
