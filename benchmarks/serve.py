"""``nodestep serve`` under LangGraph's Python client, side by side with ``langgraph dev``.

    python benchmarks/serve.py [--runs 300] [--clients 200] [--hold 1.0] [--no-langgraph]

Three figures, each server measured in the same run:

1. ``runs.wait`` of a three-node graph through ``langgraph-sdk`` on localhost, one run at
   a time on a new thread each, p50 and p99; beside it ``GET /ok`` through the same client
   (the HTTP client and connection alone) and the in-process ``ainvoke`` of the same graph
   on the same kind of store. The server's overhead is ``wait - ok - ainvoke``.
2. ``--clients`` streaming clients at once (``runs.stream`` of a node that sleeps
   ``--hold`` seconds, each on its own thread): errors, and the time until the last ends.
3. The same two against ``langgraph dev`` (``langgraph-cli[inmem]``, in memory), unless
   ``--no-langgraph`` or it is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "src"), str(HERE)]

from langgraph_sdk import get_client  # noqa: E402
from serve_graphs import LANGGRAPH_SOURCE, three  # noqa: E402

from nodestep import SQLiteStateStore  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ok(url: str, process: subprocess.Popen[bytes], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer /ok")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


async def waits(url: str, runs: int) -> dict[str, float]:
    async with get_client(url=url, timeout=60) as client:
        waited, oked = [], []
        for n in range(runs + 20):  # the first 20 warm up
            tid = (await client.threads.create())["thread_id"]
            start = time.perf_counter()
            values = await client.runs.wait(tid, "three", input={"n": 0})
            took = time.perf_counter() - start
            assert values["n"] == 3, values
            start = time.perf_counter()
            await client.http.get("/ok")
            ok = time.perf_counter() - start
            if n >= 20:
                waited.append(took)
                oked.append(ok)
    return {
        "wait_p50": pct(waited, 0.5),
        "wait_p99": pct(waited, 0.99),
        "ok_p50": pct(oked, 0.5),
        "ok_p99": pct(oked, 0.99),
    }


async def inprocess(path: Path, runs: int) -> dict[str, float]:
    store = SQLiteStateStore(path)
    took = []
    for n in range(runs + 20):
        start = time.perf_counter()
        result = await three.ainvoke({"n": 0}, thread_id=str(uuid.uuid4()), state_store=store)
        if n >= 20:
            took.append(time.perf_counter() - start)
        assert result.state.n == 3
    await store.aclose()
    return {"invoke_p50": pct(took, 0.5), "invoke_p99": pct(took, 0.99)}


async def streams(url: str, clients: int, hold: float) -> dict[str, float]:
    async with get_client(url=url, timeout=120) as client:
        threads = [(await client.threads.create())["thread_id"] for _ in range(clients)]
        errors = 0

        async def one(tid: str) -> None:
            nonlocal errors
            try:
                events = [
                    p.event
                    async for p in client.runs.stream(
                        tid, "hold", input={"seconds": hold}, stream_mode="values"
                    )
                ]
                if events[0] != "metadata" or "error" in events:
                    errors += 1
            except Exception:
                errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(one(tid) for tid in threads))
        return {"clients": clients, "errors": errors, "seconds": time.perf_counter() - start}


def start_nodestep(folder: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    store = f"sqlite:///{folder / 'threads.db'}"
    process = subprocess.Popen([sys.executable, str(HERE / "serve_graphs.py"), str(port), store])
    url = f"http://127.0.0.1:{port}"
    wait_ok(url, process)
    return url, process


def start_langgraph(folder: Path) -> tuple[str, subprocess.Popen[bytes]] | None:
    cli = shutil.which("langgraph") or str(Path(sys.executable).with_name("langgraph"))
    if not Path(cli).exists():
        return None
    (folder / "lg_graphs.py").write_text(LANGGRAPH_SOURCE)
    (folder / "langgraph.json").write_text(
        '{"dependencies": ["."], "graphs": {"three": "./lg_graphs.py:three",'
        ' "hold": "./lg_graphs.py:hold"}}'
    )
    port = free_port()
    process = subprocess.Popen(
        [cli, "dev", "--port", str(port), "--no-browser", "--no-reload"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "LANGSMITH_TRACING": "false"},
    )
    url = f"http://127.0.0.1:{port}"
    wait_ok(url, process)
    return url, process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--hold", type=float, default=1.0)
    parser.add_argument("--no-langgraph", action="store_true")
    args = parser.parse_args()
    with open("/proc/loadavg") as load:
        print("load:", load.read().strip())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        servers = {"nodestep": start_nodestep(folder)}
        if not args.no_langgraph:
            started = start_langgraph(folder)
            if started is not None:
                servers["langgraph dev"] = started
        try:
            base = asyncio.run(inprocess(folder / "inprocess.db", args.runs))
            print(
                f"in-process ainvoke (SQLite): p50 {base['invoke_p50']:.2f} ms, "
                f"p99 {base['invoke_p99']:.2f} ms"
            )
            for name, (url, _) in servers.items():
                w = asyncio.run(waits(url, args.runs))
                p50 = w["wait_p50"] - w["ok_p50"] - base["invoke_p50"]
                p99 = w["wait_p99"] - w["ok_p99"] - base["invoke_p99"]
                print(
                    f"{name}: runs.wait p50 {w['wait_p50']:.2f} ms, p99 {w['wait_p99']:.2f} ms; "
                    f"GET /ok p50 {w['ok_p50']:.2f} ms, p99 {w['ok_p99']:.2f} ms; "
                    f"overhead over ainvoke p50 {p50:.2f} ms, p99 {p99:.2f} ms"
                )
            for name, (url, _) in servers.items():
                s = asyncio.run(streams(url, args.clients, args.hold))
                print(
                    f"{name}: {s['clients']} streaming clients, {s['errors']} errors, "
                    f"all done in {s['seconds']:.2f} s (each holds {args.hold} s)"
                )
        finally:
            for _, process in servers.values():
                process.terminate()
                process.wait(timeout=30)


if __name__ == "__main__":
    main()
