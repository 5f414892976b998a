"""@node(timeout=...): the engine's limit is a NodeTimeoutError with a cause; a node's isn't."""

from __future__ import annotations

import time

import anyio
import pytest

from nodestep import END, START, BaseState, Graph, NodeTimeoutError, node

pytestmark = pytest.mark.anyio


class S(BaseState):
    count: int = 0


def _graph(n):
    return Graph(S).flow(START >> n, n >> END)


async def test_async_node_past_its_limit_has_the_cancellation_behind_a_timeout_cause():
    @node(timeout=0.01)
    async def stuck(state: S):
        await anyio.sleep_forever()

    with pytest.raises(
        NodeTimeoutError,
        match=r"^Node 'stuck' timed out after 0\.01s; give it a longer",
    ) as info:
        await _graph(stuck).ainvoke({})
    cause = info.value.__cause__
    assert isinstance(cause, TimeoutError)
    assert not isinstance(cause, NodeTimeoutError)
    assert str(cause) == "node 'stuck' was cancelled at its 0.01s limit"
    # The cancellation shows where the node was when the limit hit.
    assert isinstance(cause.__cause__, anyio.get_cancelled_exc_class())
    frames = []
    tb = cause.__cause__.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "stuck" in frames


async def test_def_node_past_its_limit_has_a_timeout_cause_that_describes_it():
    @node(timeout=0.01)
    def slow(state: S):
        time.sleep(0.03)  # real time: a thread that runs past its node's timeout of 0.01 s
        return {"count": 1}

    with pytest.raises(
        NodeTimeoutError,
        match=r"^Node 'slow' timed out after 0\.01s; give it a longer",
    ) as info:
        await _graph(slow).ainvoke({})
    cause = info.value.__cause__
    assert isinstance(cause, TimeoutError)
    assert not isinstance(cause, NodeTimeoutError)
    assert str(cause).startswith("node 'slow' returned after 0.0")
    assert str(cause).endswith(
        "s, past its 0.01s limit; a thread cannot be stopped, so the limit is checked on return"
    )


async def test_async_node_own_timeout_error_under_a_limit_stays_its_own_failure():
    raised = TimeoutError("the HTTP client gave up")

    @node(timeout=5)
    async def fetch(state: S):
        raise raised

    with pytest.raises(TimeoutError, match=r"^the HTTP client gave up$") as info:
        await _graph(fetch).ainvoke({})
    assert info.value is raised
    assert not isinstance(info.value, NodeTimeoutError)


async def test_def_node_own_timeout_error_under_a_limit_stays_its_own_failure():
    raised = TimeoutError("the database lock wait ran out")

    @node(timeout=5)
    def query(state: S):
        raise raised

    with pytest.raises(TimeoutError, match=r"^the database lock wait ran out$") as info:
        await _graph(query).ainvoke({})
    assert info.value is raised
    assert not isinstance(info.value, NodeTimeoutError)
