"""pytest's setup for the repository as a whole; the tests' fixtures are in tests/conftest.py.

The suite runs in worker processes (pytest-xdist, set in pyproject.toml). There, a path that
does not exist, or a test id that names no test, would run nothing and not say why
(pytest-xdist issue #109). So a path that does not exist is refused before the workers
start, as pytest refuses it in one process; and a run of chosen tests (``file::test``) runs
in this process, where pytest names a test id that matches nothing, and where a few tests
do not wait for workers to start.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which starts the workers
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # a worker: its controller has checked the paths
    here = config.invocation_params.dir
    for arg in config.args:
        path = arg.split("::", 1)[0]
        if path and not (here / path).exists():
            raise pytest.UsageError(f"file or directory not found: {arg}")
    if any("::" in arg for arg in config.args) and hasattr(config.option, "numprocesses"):
        config.option.numprocesses = 0
        config.option.dist = "no"
        config.option.tx = []
