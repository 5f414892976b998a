"""A worker refuses settings that would make it serve nothing or take live workers' jobs."""

from __future__ import annotations

import pytest

from nodestep import GraphConfigError
from nodestep.workers import run_worker
from nodestep.workers.__main__ import main

pytestmark = pytest.mark.anyio

DSN = "postgresql://nobody@db.invalid/queue"  # never reached: the settings fail first


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--concurrency", "0"], "concurrency (--concurrency) is how many jobs"),
        (["--concurrency", "-2"], "got -2; pass a whole number of 1 or more"),
        (["--heartbeat", "0"], "heartbeat (--heartbeat) must be a number of seconds above 0"),
        (
            ["--heartbeat", "nan"],
            "heartbeat (--heartbeat) must be a number of seconds above 0, got nan",
        ),
        (["--stalled-after", "-1"], "stalled_after (--stalled-after) must be a number"),
        (
            ["--wait-for-thread", "-5"],
            "wait_for_thread (--wait-for-thread) must be a number of seconds of 0 or more",
        ),
        (
            ["--heartbeat", "10", "--stalled-after", "5"],
            "stalled_after (--stalled-after) is 5 s, not more than heartbeat (--heartbeat) 10 s",
        ),
    ],
)
def test_the_worker_command_refuses_a_setting_out_of_range(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", DSN, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


async def test_run_worker_refuses_a_setting_of_the_wrong_kind() -> None:
    with pytest.raises(GraphConfigError, match=r"got 2\.5; pass a whole number"):
        await run_worker(DSN, concurrency=2.5)  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match=r"retry_wait must be .* 0 or more, got -1"):
        await run_worker(DSN, retry_wait=-1)
