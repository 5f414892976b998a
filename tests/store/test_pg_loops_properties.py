"""``pg_loops.LoopConnections``' bookkeeping, with stand-in connections (no server)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from nodestep.store._sql.pg_loops import Busy, LoopConnections


@dataclass(eq=False)
class _PgConn:
    transaction_status: int = 0
    finished: bool = False

    def finish(self) -> None:
        self.finished = True


@dataclass(eq=False)
class _Conn:
    pgconn: _PgConn = field(default_factory=_PgConn)

    @property
    def closed(self) -> bool:
        return self.pgconn.finished


steps = st.lists(st.sampled_from(["take", "give", "give_broken", "close"]), max_size=40)


@given(limit=st.integers(1, 4), plan=steps)
def test_connections_out_never_pass_the_limit_and_no_ended_one_is_handed_out(
    limit: int, plan: list[str]
) -> None:
    conns = LoopConnections(limit)
    out: list[_Conn] = []
    made: list[_Conn] = []
    for step in plan:
        if step == "take":
            try:
                conn = conns.take()
            except Busy:
                assert len(out) == limit  # refused only at the limit
                continue
            if conn is None:
                conn = _Conn()
                made.append(conn)
            assert not conn.closed  # never an ended connection
            assert conn not in out  # never one already out
            out.append(conn)
        elif out:
            conn = out.pop()
            if step == "give_broken":
                conn.pgconn.transaction_status = 2  # left inside a transaction
            conns.give(conn)
            if step == "give_broken" or conns.closed:
                assert conn.closed
        if step == "close":
            conns.close()
        assert conns.out == len(out) <= limit
        assert all(not c.closed for c in conns.idle)
    conns.close()
    assert conns.idle == []
    assert all(c.closed for c in made if c not in out)
