"""A worker that stalls after each run ends, before the queue records the job's end.

The window a slow machine or a GC pause opens: the test kills the worker in it (SIGKILL),
so the queue delivers the job again to another worker, as it does a stalled job.
``<marks>/<job kind>.ran`` says the run ended (the worker's pid in it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio

from nodestep.workers import _worker
from nodestep.workers._jobs import RunJob

_execute = _worker.execute


async def _stalling(job: RunJob, **options: Any) -> None:
    await _execute(job, **options)
    (Path(os.environ["NODESTEP_TEST_MARKS"]) / f"{job.kind}.ran").write_text(str(os.getpid()))
    await anyio.sleep(60)  # the test kills this worker here; 60 s bounds a kill that never comes


if __name__ == "__main__":
    _worker.execute = _stalling  # _again_after_outage calls it through the module
    dsn, queue = sys.argv[1:3]
    anyio.run(
        lambda: _worker.run_worker(
            dsn, queue=queue, heartbeat=0.3, stalled_after=1.5, install_signal_handlers=False
        ),
        backend="asyncio",
    )
