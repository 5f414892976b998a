"""``python -m nodestep.workers``: start a worker, or create the queue's tables.

python -m nodestep.workers schema postgresql://host/db
python -m nodestep.workers worker postgresql://host/db [--graph shop.graphs:orders] ...
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from nodestep import NodestepError
from nodestep.workers._queue_app import ensure_schema, make_app, open_app
from nodestep.workers._worker import run_worker


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m nodestep.workers", description="Serve queued nodestep runs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    schema = commands.add_parser("schema", help="create the queue's tables (once)")
    schema.add_argument("dsn", help="the queue's PostgreSQL URL")
    worker = commands.add_parser("worker", help="serve queued runs until stopped")
    worker.add_argument("dsn", help="the queue's PostgreSQL URL")
    worker.add_argument("--queue", default="nodestep", help="queue name (default: nodestep)")
    worker.add_argument("--concurrency", type=int, default=1, help="jobs at once (default: 1)")
    worker.add_argument(
        "--graph", action="append", default=[], help="import this graph at start (repeatable)"
    )
    worker.add_argument("--heartbeat", type=float, default=10.0, help="seconds between beats")
    worker.add_argument(
        "--stalled-after",
        type=float,
        default=30.0,
        help="seconds of a worker's silence after which its jobs are queued again",
    )
    worker.add_argument(
        "--wait-for-thread", type=float, default=60.0, help="seconds to wait for a held thread"
    )
    return parser


async def _schema(dsn: str) -> bool:
    app = make_app(dsn)
    await open_app(app, dsn)
    try:
        return await ensure_schema(app)
    finally:
        await app.close_async()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        if args.command == "schema":
            made = asyncio.run(_schema(args.dsn))
            print("queue tables created" if made else "queue tables already there")
            return 0
        asyncio.run(
            run_worker(
                args.dsn,
                queue=args.queue,
                concurrency=args.concurrency,
                heartbeat=args.heartbeat,
                stalled_after=args.stalled_after,
                wait_for_thread=args.wait_for_thread,
                graphs=tuple(args.graph),
            )
        )
    except NodestepError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover - Ctrl-C before procrastinate's handler
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
