"""docs/cli.md's terminal sessions, run for real: each ``$ command`` of a ```console block
runs in one shell, in one folder, and must print what the page shows after it.

The page's first python block is the module its commands name (``blog:graph``); it is
written to ``blog.py`` there. ``$ export NAME=value`` lines set the environment of the
commands after them. Event ids, run ids and times differ on each run: they are compared as
placeholders, so the page shows real output and the test still checks every other character.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs import parse_fences

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

_VARYING = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<event-id>"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"), "<time>"),
    (re.compile(r"\b\d{10}\.\d+"), "<ts>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<run-id>"),
    (re.compile(r"\b[0-9a-f]{8}\b"), "<short-id>"),
]


def sessions() -> list[tuple[int, list[tuple[str, str]]]]:
    """Each console block's line and its (command, expected output) pairs."""
    found = []
    for fence in parse_fences(PAGE.read_text(encoding="utf-8")):
        if fence.lang != "console":
            continue
        pairs: list[tuple[str, str]] = []
        for line in fence.body.splitlines(keepends=True):
            if line.startswith("$ "):
                pairs.append((line[2:].strip(), ""))
            elif pairs:
                pairs[-1] = (pairs[-1][0], pairs[-1][1] + line)
        found.append((fence.line, pairs))
    return found


def write_files(folder: Path) -> None:
    """Write the page's module (its first python block) and its ``title="NAME"`` blocks.

    ``title=`` is the fence option the site shows as the block's caption, so a reader
    sees the file name the commands after it use.
    """
    fences = parse_fences(PAGE.read_text(encoding="utf-8"))
    module = next(f.body for f in fences if f.lang == "python")
    (folder / "blog.py").write_text(module, encoding="utf-8")
    for fence in fences:
        for flag in fence.flags:
            if flag.startswith("title="):
                name = flag[len("title=") :].strip('"')
                (folder / name).write_text(fence.body, encoding="utf-8")


def normal(text: str) -> str:
    for pattern, token in _VARYING:
        text = pattern.sub(token, text)
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def play(folder: Path, pairs: list[tuple[str, str]], env: dict[str, str]) -> list[str]:
    """Run each command in ``folder``; return what each printed, stdout and stderr together."""
    printed = []
    for command, _ in pairs:
        if command.startswith("export "):
            name, _, value = command[len("export ") :].partition("=")
            env[name] = value
            printed.append("")
            continue
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
        )
        printed.append(done.stdout)
    return printed


@pytest.mark.slow
def test_every_session_of_the_page_prints_what_it_shows(tmp_path: Path) -> None:
    write_files(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "100",
        "PYTHONPATH": str(tmp_path),
    }
    env.pop("NODESTEP_STORE", None)
    for line, pairs in sessions():
        for (command, expected), got in zip(pairs, play(tmp_path, pairs, env), strict=True):
            assert normal(got) == normal(expected), f"docs/cli.md:{line}: $ {command}"


if __name__ == "__main__":  # print the page's sessions as they run now, to paste in
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        write_files(here)
        env = {
            **os.environ,
            "COLUMNS": "100",
            "PYTHONPATH": folder,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        for line, pairs in sessions():
            print(f"---- docs/cli.md:{line}")
            for (command, _), got in zip(pairs, play(here, pairs, env), strict=True):
                print(f"$ {command}\n{got}", end="")
