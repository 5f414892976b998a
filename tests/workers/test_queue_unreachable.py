"""A queue whose database cannot be reached: every entry point says why, and how to fix it."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from nodestep import GraphConfigError
from nodestep.workers import RunQueue, _queue_app, run_worker
from nodestep.workers.__main__ import main

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # each waits OPEN_TIMEOUT for the pool

WHY = r"Cannot connect to the run queue's database .* database \"no_such_queue_db\" does not exist"


@pytest.fixture
def missing(queue_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A URL on the test's server naming a database that is not there, with a password."""
    monkeypatch.setattr(_queue_app, "OPEN_TIMEOUT", 0.2)  # the pool's wait, before the reason
    name = conninfo_to_dict(queue_dsn)["dbname"]
    url = queue_dsn.replace(name, "no_such_queue_db")
    return f"{url}{'&' if '?' in url else '?'}password=sekrit"


async def test_run_queue_names_the_database_it_cannot_reach_and_hides_the_password(
    missing: str,
) -> None:
    with pytest.raises(GraphConfigError, match=WHY) as caught:
        async with RunQueue(missing):
            pass
    assert "sekrit" not in str(caught.value)
    assert "python -m nodestep.workers schema URL" in str(caught.value)


async def test_a_worker_names_the_database_it_cannot_reach(missing: str) -> None:
    with pytest.raises(GraphConfigError, match=WHY):
        await run_worker(missing, install_signal_handlers=False)


def test_the_schema_command_names_the_database_it_cannot_reach(
    missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Cannot connect to the run queue's database")
    assert "sekrit" not in err
