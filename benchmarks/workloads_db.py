"""The database stores side by side with LangGraph's database savers (workload DB).

* W4 on ``SQLiteStateStore`` against ``SqliteSaver`` and on ``PostgresStateStore`` against
  ``PostgresSaver``: the 1,000-iteration loop, a fresh database (SQLite) or a fresh thread
  (PostgreSQL, one database as a service has) per run; each side as it ships.
* Cold ``get_state`` of a 1,000-step thread on SQLite: a new store object (nodestep) or a
  new connection and saver (LangGraph) per call, as a fresh process opens them.
* W6 on both stores: ``get_state`` and one superstep's append on a thread of about 100
  events against one of about ``W6_DB_LARGE`` events (the same database).

The PostgreSQL rows need a server: ``NODESTEP_BENCH_POSTGRES_DSN`` (or the tests'
``NODESTEP_TEST_POSTGRES_DSN``); without one they are skipped with a note. Each run uses a
new schema (nodestep) and new tables (LangGraph's, in a new schema too), dropped at the end.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable
from typing import Any

import workloads_langgraph as lgw
import workloads_nodestep as nsw
from harness import GET_STATE_CALLS, AsyncDriver, Budget, Stats, Timed, measure, now_ns, time_sync
from report import SCALING, Row, Target, ratio

from nodestep import PostgresStateStore, SQLiteStateStore

LOOP = 1000
W6_DB_SMALL, W6_DB_LARGE = 100, 20_000
TARGETS = {"W4": Target(">=", 5), "cold": Target(">=", 1), "W6": Target("<=", 1.5)}
_ids = itertools.count()


def dsn() -> str:
    """The PostgreSQL server of the benchmark, or ``""``."""
    return os.environ.get("NODESTEP_BENCH_POSTGRES_DSN") or os.environ.get(
        "NODESTEP_TEST_POSTGRES_DSN", ""
    )


def _tid() -> str:
    return f"db-{next(_ids)}"


class Stores:
    """The stores and schemas a run makes, closed and dropped at the end, never timed."""

    def __init__(self, driver: AsyncDriver) -> None:
        self.driver = driver
        self.open: list[Any] = []
        self.schemas: list[str] = []

    def sqlite(self, path: str, synchronous: str = "NORMAL") -> SQLiteStateStore:
        store = SQLiteStateStore(path, synchronous=synchronous)
        self.open.append(store)
        return store

    def postgres(self, **options: Any) -> PostgresStateStore:
        """A store in a schema of its own; ``options`` as ``PostgresStateStore`` takes them."""
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        store = PostgresStateStore(dsn(), schema=schema, **options)
        store.create_tables()
        self.open.append(store)
        self.schemas.append(schema)
        return store

    def close(self) -> None:
        for store in self.open:
            self.driver.run(store.aclose())
        if self.schemas:
            import psycopg

            with psycopg.connect(dsn(), autocommit=True) as conn:
                for schema in self.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def ns_loop(make: Callable[[], Any], driver: AsyncDriver) -> Timed:
    """W4 on nodestep: a graph on ``make()``'s store, a fresh store and thread per run."""
    graph = nsw.loop_graph(LOOP, make())
    result = graph.invoke({"n": 0}, thread_id=_tid())
    assert result.state.n == LOOP, "nodestep loop result"

    def run() -> int:
        g = nsw.loop_graph(LOOP, make())
        tid = _tid()
        return time_sync(lambda: g.invoke({"n": 0}, thread_id=tid))

    return run


def server_settings() -> str:
    """The benchmark server's durability settings, which both sides' commits share."""
    import psycopg

    names = ("fsync", "synchronous_commit", "wal_sync_method")
    with psycopg.connect(dsn(), autocommit=True) as conn:
        found = [f"{n}={conn.execute(f'SHOW {n}').fetchone()[0]}" for n in names]
    return ", ".join(found)


def lg_postgres_loop(
    schema: str, durability: str | None = None
) -> tuple[Timed, Callable[[], None]]:
    """W4 on LangGraph's PostgresSaver, as its docs set it up; a fresh thread per run.

    ``durability="sync"``: each step's checkpoint is written before the next step starts,
    as nodestep's appends are; LangGraph's default (``"async"``) writes it meanwhile.
    """
    extra = {} if durability is None else {"durability": durability}
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(
        dsn(),
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )
    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    saver = PostgresSaver(conn)
    saver.setup()
    graph = lgw._loop_graph(LOOP, saver)

    def run() -> int:
        cfg = {"recursion_limit": 2 * LOOP, "configurable": {"thread_id": _tid()}}
        return time_sync(lambda: graph.invoke({"n": 0}, config=cfg, **extra))

    cfg = {"recursion_limit": 2 * LOOP, "configurable": {"thread_id": _tid()}}
    assert graph.invoke({"n": 0}, config=cfg, **extra)["n"] == LOOP, "LangGraph loop result"
    return run, conn.close


def ns_async_loop(store: Any, driver: AsyncDriver) -> Timed:
    """W4 with ``ainvoke`` on a store whose async pool serves the driver's loop."""
    driver.run(store.aopen())
    graph = nsw.loop_graph(LOOP, store)
    assert driver.run(graph.ainvoke({"n": 0}, thread_id=_tid())).state.n == LOOP

    def run() -> int:
        tid = _tid()
        return int(driver.timed(lambda: graph.ainvoke({"n": 0}, thread_id=tid)))

    return run


def lg_async_postgres_loop(schema: str, driver: AsyncDriver) -> Timed:
    """W4 with ``ainvoke`` on LangGraph's AsyncPostgresSaver, as its docs set it up."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async def setup() -> Any:
        conn = await AsyncConnection.connect(
            dsn(), autocommit=True, prepare_threshold=0, row_factory=dict_row,
            options=f"-c search_path={schema}",
        )  # fmt: skip
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        saver = AsyncPostgresSaver(conn)
        await saver.setup()
        return lgw._loop_graph(LOOP, saver)

    graph = driver.run(setup())

    def config() -> dict[str, Any]:
        return {"recursion_limit": 2 * LOOP, "configurable": {"thread_id": _tid()}}

    assert driver.run(graph.ainvoke({"n": 0}, config=config()))["n"] == LOOP

    def run() -> int:
        c = config()
        return int(driver.timed(lambda: graph.ainvoke({"n": 0}, config=c)))

    return run


def cold_get_state_sqlite(path: str, stores: Stores) -> Timed:
    """nodestep's cold ``get_state`` on SQLite: a new store object per call.

    The store that wrote the thread stays open, as LangGraph's side keeps the connection
    of the saver that wrote its thread: so neither side's cold open is the database's only
    connection, which would create the WAL's files at open and remove them at close.
    """
    driver = stores.driver
    store = stores.sqlite(path)
    graph = nsw.loop_graph(LOOP, store)
    tid = _tid()
    graph.invoke({"n": 0}, thread_id=tid)

    def cold() -> int:
        async def body() -> int:
            t0 = now_ns()
            st = SQLiteStateStore(path)
            snap = await graph.get_state(tid, state_store=st)
            dt = now_ns() - t0
            await st.aclose()
            assert snap.value.n == LOOP
            return dt

        return int(driver.run(body()))

    return cold


def big_thread(store: Any, events: int, driver: AsyncDriver) -> tuple[str, int]:
    """One thread of about ``events`` events (a loop writes about 1 event a step)."""
    tid = _tid()
    steps = max(1, events - 3)
    driver.run(nsw.loop_graph(steps, store).ainvoke({"n": 0}, thread_id=tid))
    return tid, driver.run(store.last_sequence(tid, "main"))


def w6_ops(store: Any, tid: str, driver: AsyncDriver) -> dict[str, Timed]:
    g = nsw.single_step_graph(store)
    driver.run(g.get_state(tid))
    return {
        "get_state": lambda: driver.timed(lambda: g.get_state(tid), repeat=GET_STATE_CALLS),
        "append (ainvoke)": lambda: driver.timed(lambda: g.ainvoke({}, thread_id=tid)),
    }


def run(ctx: Any, head_row: Callable[..., None]) -> None:
    """Run the DB workload into ``ctx`` (run.py's context), rows as run.py adds them."""
    stores = Stores(ctx.driver)
    try:
        _w4(ctx, head_row, stores)
        _cold(ctx, head_row, stores)
        _w6(ctx, stores)
    finally:
        stores.close()


def _w4(ctx: Any, head_row: Callable[..., None], stores: Stores) -> None:
    tmp, n = ctx.tmpdir, itertools.count()
    cases: dict[str, Timed] = {
        "ns_sqlite": ns_loop(
            lambda: stores.sqlite(os.path.join(tmp, f"db-{next(n)}.db")), ctx.driver
        ),
        "ns_sqlite_full": ns_loop(
            lambda: stores.sqlite(os.path.join(tmp, f"db-{next(n)}.db"), "FULL"), ctx.driver
        ),
        "lg_sqlite": lgw.durable_loop(LOOP, tmp, tag="db").run,
    }
    closers: list[Callable[[], None]] = []
    if dsn():
        store = stores.postgres()  # one store, as a service keeps one; a new thread per run
        cases["ns_pg"] = ns_loop(lambda: store, ctx.driver)
        answered = stores.postgres(pipeline=0)
        cases["ns_pg_answered"] = ns_loop(lambda: answered, ctx.driver)
        schema = f"bench_lg_{uuid.uuid4().hex[:12]}"
        stores.schemas.append(schema)
        cases["lg_pg"], close = lg_postgres_loop(schema)
        closers.append(close)
        cases["lg_pg_sync"], close = lg_postgres_loop(schema, durability="sync")
        closers.append(close)
        cases["ns_pg_async"] = ns_async_loop(stores.postgres(), ctx.driver)
        schema = f"bench_lga_{uuid.uuid4().hex[:12]}"
        stores.schemas.append(schema)
        cases["lg_pg_async"] = lg_async_postgres_loop(schema, ctx.driver)
    else:
        ctx.notes.append(
            "DB: PostgreSQL rows skipped: set NODESTEP_BENCH_POSTGRES_DSN (e.g. start a server "
            "with scripts/pg_test_server.sh)"
        )
    budget = _few(ctx.budget)
    stats = measure(cases, budget=budget, divisor=LOOP)
    for close in closers:
        close()
    desc = f"loop ×{LOOP}, `invoke`"
    head_row(
        ctx, "W4", f"{desc}; SQLiteStateStore vs SqliteSaver (both default)", "µs per step",
        stats, ns="ns_sqlite", lg="lg_sqlite", floor=None, target=TARGETS["W4"],
        note="as each ships: nodestep WAL + synchronous=NORMAL (no fsync per append, as the "
        "file store's default); SqliteSaver WAL + SQLite's default (FULL)",
    )  # fmt: skip
    head_row(
        ctx, "W4", f"{desc}; SQLiteStateStore synchronous=FULL vs SqliteSaver (default)",
        "µs per step", stats, ns="ns_sqlite_full", lg="lg_sqlite", floor=None,
        target=TARGETS["W4"], note="both sides sync the WAL to disk at every commit",
    )  # fmt: skip
    if dsn():
        server = f"same server (local socket; {server_settings()})"
        head_row(
            ctx, "W4", f"{desc}; PostgresStateStore vs PostgresSaver (both default)",
            "µs per step", stats, ns="ns_pg", lg="lg_pg", floor=None, target=TARGETS["W4"],
            note=f"{server}; a new thread per run; nodestep sends a step's records before the "
            "next step runs and reads the answers up to 2 steps later (pipeline=2); "
            "LangGraph's default durability='async' writes a step's checkpoint while the next "
            "step runs (a killed process may lose its last steps on either side)",
        )  # fmt: skip
        head_row(
            ctx, "W4", f"{desc}; PostgresStateStore vs PostgresSaver durability='sync'",
            "µs per step", stats, ns="ns_pg", lg="lg_pg_sync", floor=None,
            target=TARGETS["W4"], note=f"{server}; LangGraph waits for each checkpoint's "
            "answer, nodestep as it ships (pipeline=2)",
        )  # fmt: skip
        head_row(
            ctx, "W4", f"{desc}; PostgresStateStore(pipeline=0) vs PostgresSaver "
            "durability='sync'", "µs per step", stats, ns="ns_pg_answered", lg="lg_pg_sync",
            floor=None, note=f"{server}; like with like: on both sides each step's answer is "
            "read before the next step runs (no target: nodestep does not ship so)",
        )  # fmt: skip
        head_row(
            ctx, "W4", f"loop ×{LOOP}, `ainvoke`; PostgresStateStore async pool vs "
            "AsyncPostgresSaver", "µs per step", stats, ns="ns_pg_async", lg="lg_pg_async",
            floor=None, target=TARGETS["W4"], note="psycopg's async API on both sides; LangGraph's "
            "default durability='async'",
        )  # fmt: skip


def _cold(ctx: Any, head_row: Callable[..., None], stores: Stores) -> None:
    path = os.path.join(ctx.tmpdir, "db-cold.db")
    cases = {
        "ns": cold_get_state_sqlite(path, stores),
        "lg": lgw.history_reads(LOOP, os.path.join(ctx.tmpdir, "db-cold-lg.sqlite"))[
            "get_state_cold"
        ],
    }
    stats = measure(cases, budget=ctx.budget)
    head_row(
        ctx, "DB", f"cold `get_state`, {LOOP}-step thread, SQLiteStateStore vs SqliteSaver",
        "µs per call", stats, ns="ns", lg="lg", floor=None, target=TARGETS["cold"],
        note="a new store object / a new sqlite3 connection and saver per call; on both "
        "sides the connection that wrote the thread stays open",
    )  # fmt: skip


def _w6(ctx: Any, stores: Stores) -> None:
    makers: dict[str, Callable[[], Any]] = {
        "SQLiteStateStore": lambda: stores.sqlite(os.path.join(ctx.tmpdir, "db-w6.db"))
    }
    if dsn():
        makers["PostgresStateStore"] = stores.postgres
    for name, make in makers.items():
        store = make()
        ops: dict[str, Timed] = {}
        sizes: dict[str, int] = {}
        for label, want in (("small", W6_DB_SMALL), ("large", W6_DB_LARGE)):
            tid, sizes[label] = big_thread(store, want, ctx.driver)
            for op, fn in w6_ops(store, tid, ctx.driver).items():
                ops[f"{label}|{op}"] = fn
        divisors = {k: GET_STATE_CALLS if k.endswith("get_state") else 1 for k in ops}
        stats: dict[str, Stats] = measure(ops, budget=_few(ctx.budget), divisor=divisors)
        for op in ("get_state", "append (ainvoke)"):
            s, lg = stats[f"small|{op}"], stats[f"large|{op}"]
            ctx.add(
                Row(
                    SCALING, "W6", f"{name} {op}, one thread of {sizes['small']:,} vs "
                    f"{sizes['large']:,} events", "µs per call", {"small": s, "large": lg},
                    ratio=ratio(lg, s), ratio_of="large / small", target=TARGETS["W6"],
                    note="one store object kept open; both threads in one database",
                )
            )  # fmt: skip


def _few(budget: Budget) -> Budget:
    import dataclasses

    return dataclasses.replace(budget, max_reps=min(budget.max_reps, 15))
