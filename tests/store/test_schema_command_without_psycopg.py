"""``python -m nodestep.store postgres-schema`` without psycopg names the extra, nothing else."""

from __future__ import annotations

import sys

import pytest

from nodestep.store.__main__ import main


def test_postgres_schema_without_psycopg_names_the_extra_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # None in sys.modules makes `import psycopg` fail as it does where the extra is missing.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    assert main(["postgres-schema", "postgresql://admin@db.example/app"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'nodestep[postgres]'" in err
    # Not the advice for a server that refused: the dsn and the server are not the problem.
    assert "Check the dsn" not in err
    assert len(err.strip().splitlines()) == 1
