"""Development sessions for nodestep.

    nox -l              list the sessions
    nox                 the default sessions (all but ``fast``, ``bench`` and ``reliability``)
    nox -s fast         the tests not marked slow, for local work (CI runs them all)
    nox -s tests        run one session; arguments after ``--`` go to the tool

Sessions use the Python that runs nox and keep their virtualenvs between runs
(``nox -R`` skips reinstalling, ``nox --reuse-venv=no`` rebuilds them).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint", "types", "docs", "examples"]

ROOT = Path(__file__).parent
LINT_PATHS = [
    "src",
    "tests",
    "examples",
    "benchmarks",
    "scripts",
    "docs-helpers",
    "conftest.py",
    "noxfile.py",
]


def extra(name: str) -> list[str]:
    """Requirements of one optional extra, read from pyproject.toml.

    Lets a session install a tool (ruff, mypy) at the pinned range without
    installing nodestep itself.
    """
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    requirements: list[str] = project["optional-dependencies"][name]
    return requirements


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite: ``nox -s tests -- -k docs -x``."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def fast(session: nox.Session) -> None:
    """Run the tests not marked slow, for local work; CI runs ``tests`` (all of them)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and formatting with ruff."""
    session.install(*extra("lint"))
    paths = [p for p in LINT_PATHS if (ROOT / p).exists()]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)


@nox.session
def types(session: nox.Session) -> None:
    """Type-check src/ with mypy in strict mode."""
    # The project itself is installed so that pydantic's mypy plugin and the
    # runtime dependencies' stubs are importable.
    session.install("-e", ".[types]")
    session.run("mypy", "--strict", "src", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site; any warning fails the build."""
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session
def examples(session: nox.Session) -> None:
    """Run every examples/*.py script; a non-zero exit fails the session."""
    scripts = sorted((ROOT / "examples").glob("*.py"))
    if not scripts:
        session.skip("no scripts in examples/")
    session.install("-e", ".")
    # Run from a scratch directory so that files an example writes stay out of the tree.
    with session.chdir(session.create_tmp()):
        for script in scripts:
            session.run("python", str(script))


@nox.session
def reliability(session: nox.Session) -> None:
    """Measure the file store's reliability with full counts and rewrite RELIABILITY.md.

    ``nox -s reliability -- --quick`` for a fast pass; ``--seed N`` repeats a run. Counts
    can also be set by environment variables (``NODESTEP_CRASHES``, ...; see the script).
    """
    session.install("-e", ".[test]")
    session.run("python", "scripts/reliability.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks: ``nox -s bench -- <options for benchmarks/run.py>``."""
    session.install("-e", ".[bench]")
    session.run("python", "benchmarks/run.py", *session.posargs)
