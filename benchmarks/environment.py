"""What the figures were measured on: package versions and the machine."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = (
    "nodestep",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langchain-core",
    "pydantic",
    "pydantic-core",
    "orjson",
)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "sqlite (library)": sqlite3.sqlite_version}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def filesystem_of(path: str) -> str:
    """The mount (device, type) holding ``path``, from /proc/mounts."""
    try:
        mounts = [ln.split() for ln in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best = ("", "unknown", "unknown")
    for dev, mnt, fstype, *_ in mounts:
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
            best = (mnt, fstype, dev)
    return f"{best[1]} ({best[2]} mounted at {best[0]})"


def git_commit(repo: Path) -> str:
    try:
        r = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = r.stdout.strip() or "no commit"
    return commit + (" (src/ has uncommitted changes)" if dirty.stdout.strip() else "")


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def machine(tmpdir: str) -> dict[str, object]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "temp_dir_filesystem": filesystem_of(tmpdir),
        "load_average_at_start": load_average(),
    }
