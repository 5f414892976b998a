"""Empty tasks for ``queue_peers.py``: one for procrastinate, one for Celery."""

from __future__ import annotations

import os
from typing import Any


def procrastinate_app(dsn: str) -> Any:
    import procrastinate

    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))


def make_celery(url: str) -> Any:
    import celery

    app = celery.Celery("peer", broker=url, backend=url)
    app.conf.task_acks_late = True  # at-least-once: a job is acknowledged after it ran
    app.conf.worker_prefetch_multiplier = 1

    @app.task(name="peer.noop")
    def noop() -> None:
        return None

    return app


app = procrastinate_app(os.environ.get("NODESTEP_PEER_DSN", "postgresql:///unused"))


@app.task(name="peer.noop")
async def noop() -> None:
    return None


if os.environ.get("NODESTEP_PEER_REDIS"):
    celery_app = make_celery(os.environ["NODESTEP_PEER_REDIS"])
