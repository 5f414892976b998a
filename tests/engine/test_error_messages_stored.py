"""Whatever a node's exception says, its failure is stored and the exception reaches the caller."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    StateStoreError,
    interrupt,
    node,
)
from nodestep._engine.redact import MASK, MAX_MESSAGE, stored_error
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class S(BaseState):
    count: int = 0


@node
async def lone_surrogate(state: S) -> dict[str, Any]:
    raise ValueError("bad \udc80 byte")


@node
def lone_surrogate_sync(state: S) -> dict[str, Any]:
    raise ValueError("bad \udc80 byte")


@pytest.mark.parametrize("failing", [lone_surrogate, lone_surrogate_sync], ids=["async", "def"])
async def test_a_lone_surrogate_in_a_node_error_is_stored_escaped_and_the_error_raised(
    failing: Any, store: StateStore
):
    graph = Graph(S, state_store=store).flow(START >> failing, failing >> END)
    with pytest.raises(ValueError, match=r"^bad \udc80 byte$"):
        await graph.ainvoke({}, thread_id="t")
    snapshot = await graph.get_state("t")
    assert snapshot.status == "failed"
    assert snapshot.error_message == "bad \\udc80 byte"
    failed = [e for e in (await graph.history("t")).events if e.type == "run_failed"]
    assert [e.data["message"] for e in failed] == ["bad \\udc80 byte"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


@node
def unprintable(state: S) -> dict[str, Any]:
    raise Unprintable()


async def test_an_exception_whose_str_raises_is_stored_with_a_stand_in_message():
    graph = Graph(S, state_store=InMemoryStateStore())
    graph.flow(START >> unprintable, unprintable >> END)
    try:  # not pytest.raises(match=...): its match would call the broken str()
        await graph.ainvoke({}, thread_id="t")
    except Unprintable:
        pass
    else:
        pytest.fail("the node's Unprintable did not reach the caller")
    snapshot = await graph.get_state("t")
    assert snapshot.error_type == "Unprintable"
    assert snapshot.error_message == "(no message: str() of the Unprintable raised RuntimeError)"


def test_a_long_message_is_cut_after_its_secrets_are_masked():
    from pydantic import SecretStr

    secret = "s" * 40
    error = ValueError("x" * (MAX_MESSAGE - 10) + secret)
    name, message = stored_error(error, {"key": SecretStr(secret)}, None)
    assert name == "ValueError"
    assert len(message) == MAX_MESSAGE
    assert message.endswith(MASK[:10])
    assert "s" not in message


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_every_stored_message_encodes_as_utf8(text: str):
    _, message = stored_error(ValueError(text), None, None)
    message.encode("utf-8")
    if text.isascii():
        assert message == text[:MAX_MESSAGE]


@node
def asks_with_a_surrogate(state: S) -> dict[str, Any]:
    interrupt("why \udc80?", id="why")
    return {}


async def test_a_lone_surrogate_in_an_interrupt_payload_is_refused_naming_the_interrupt():
    # A payload is state-like data, not a message: like any value without a JSON form it
    # is refused where it is made, and nothing of the pause is stored.
    graph = Graph(S, state_store=InMemoryStateStore())
    graph.flow(START >> asks_with_a_surrogate, asks_with_a_surrogate >> END)
    with pytest.raises(
        StateStoreError,
        match=r"The payload of interrupt 'asks_with_a_surrogate:why' cannot be stored as JSON: "
        r"str is not valid UTF-8",
    ):
        await graph.ainvoke({}, thread_id="t")
