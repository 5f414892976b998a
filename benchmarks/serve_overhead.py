"""The server-side cost of ``runs.wait`` over the in-process ``ainvoke``, without sockets.

    python benchmarks/serve_overhead.py [--runs 1000] [--profile]

The app from ``create_app`` is called as ASGI directly, in this process, on the same
SQLite store the in-process ``ainvoke`` uses; the two alternate, one run each at a time,
on a new thread each, so both see the same machine. What differs is what the server adds:
the request's parsing and checks, the rows stored for the run, the executor's task, the
answer's JSON. ``--profile`` prints the top of a cProfile of the server's runs.

Besides wall time, each side's process CPU time (``time.process_time``, all threads) is
measured: on a shared machine the wall-time p99 is mostly other processes' turns on the
CPU, which the CPU time does not count.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "src"), str(HERE)]

from serve_graphs import three  # noqa: E402

from nodestep import SQLiteStateStore  # noqa: E402
from nodestep.serve import create_app  # noqa: E402

_HEADERS = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]


async def call(app: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """Call the ASGI app once; return the status and the decoded JSON answer."""
    raw = b"" if body is None else json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [*_HEADERS, (b"content-length", str(len(raw)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 2024),
    }
    given = False
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, json.loads(b"".join(chunks) or b"null")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3


async def measure(folder: Path, runs: int, profile: bool) -> None:
    store = SQLiteStateStore(folder / "threads.db")
    app = create_app([three], store=store)
    waited, invoked, cpu_wait, cpu_invoke = [], [], [], []
    profiler = cProfile.Profile()
    lifespan_in, lifespan_out = anyio.create_memory_object_stream[dict[str, Any]](4)
    replies, replied = anyio.create_memory_object_stream[dict[str, Any]](4)
    async with anyio.create_task_group() as group:

        async def send(message: dict[str, Any]) -> None:
            await replies.send(message)

        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        group.start_soon(app, scope, lifespan_out.receive, send)
        await lifespan_in.send({"type": "lifespan.startup"})
        assert (await replied.receive())["type"] == "lifespan.startup.complete"
        for n in range(runs + 50):  # the first 50 warm up
            start, cpu = time.perf_counter(), time.process_time()
            result = await three.ainvoke({"n": 0}, thread_id=str(uuid.uuid4()), state_store=store)
            took_invoke = time.perf_counter() - start
            spent_invoke = time.process_time() - cpu
            assert result.state.n == 3
            _, thread = await call(app, "POST", "/threads", {})
            path = f"/threads/{thread['thread_id']}/runs/wait"
            if profile and n >= 50:
                profiler.enable()
            start, cpu = time.perf_counter(), time.process_time()
            status, values = await call(app, "POST", path, {"assistant_id": "three", "input": {}})
            took_wait = time.perf_counter() - start
            spent_wait = time.process_time() - cpu
            profiler.disable()
            assert status == 200 and values["n"] == 3, values
            if n >= 50:
                invoked.append(took_invoke)
                waited.append(took_wait)
                cpu_invoke.append(spent_invoke)
                cpu_wait.append(spent_wait)
        await lifespan_in.send({"type": "lifespan.shutdown"})
        await replied.receive()
    await store.aclose()
    over = [w - i for w, i in zip(waited, invoked, strict=True)]
    print(
        f"runs={runs}; runs.wait (ASGI, no socket) p50 {pct(waited, 0.5):.3f} ms, "
        f"p99 {pct(waited, 0.99):.3f} ms; ainvoke p50 {pct(invoked, 0.5):.3f} ms, "
        f"p99 {pct(invoked, 0.99):.3f} ms; overhead p50 "
        f"{pct(waited, 0.5) - pct(invoked, 0.5):.3f} ms, p99 "
        f"{pct(waited, 0.99) - pct(invoked, 0.99):.3f} ms; paired difference p50 "
        f"{pct(over, 0.5):.3f} ms, p99 {pct(over, 0.99):.3f} ms"
    )
    print(
        f"CPU time: runs.wait p50 {pct(cpu_wait, 0.5):.3f} ms, p99 {pct(cpu_wait, 0.99):.3f} "
        f"ms; ainvoke p50 {pct(cpu_invoke, 0.5):.3f} ms, p99 {pct(cpu_invoke, 0.99):.3f} ms; "
        f"overhead p50 {pct(cpu_wait, 0.5) - pct(cpu_invoke, 0.5):.3f} ms, p99 "
        f"{pct(cpu_wait, 0.99) - pct(cpu_invoke, 0.99):.3f} ms"
    )
    if profile:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with open("/proc/loadavg") as load:
        print("load:", load.read().strip())
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(measure, Path(tmp), args.runs, args.profile)


if __name__ == "__main__":
    main()
