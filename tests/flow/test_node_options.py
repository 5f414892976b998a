"""The node keywords retry=, breaker=, roles= and private_state= are checked as a node is made."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from nodestep import BaseState, CircuitBreaker, GraphConfigError, NodeContext, RetryPolicy, node


class S(BaseState):
    n: int = 0


class Memory(BaseModel):
    notes: list[str] = []


def plain(state: S) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retry": 3}, r"retry= takes a RetryPolicy"),
        ({"retry": CircuitBreaker()}, r"retry= takes a RetryPolicy"),
        ({"breaker": RetryPolicy()}, r"breaker= takes a CircuitBreaker"),
        ({"roles": "billing"}, r"roles= takes a list of role names, even for one"),
        ({"roles": ["ok", 3]}, r"declares the role 3"),
        ({"private_state": Memory()}, r"private_state= takes a pydantic model class"),
    ],
)
def test_a_keyword_with_a_value_it_cannot_take_is_refused_with_the_fix(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(GraphConfigError, match=message):
        node(plain, **options)


def test_the_options_are_kept_on_the_node() -> None:
    policy, breaker = RetryPolicy(), CircuitBreaker()

    @node(retry=policy, breaker=breaker, roles=["billing"], private_state=Memory)
    def n(state: S, ctx: NodeContext, *, memory: Memory) -> dict[str, Any]:
        return {}

    assert (n.retry, n.breaker, n.roles, n.private_state) == (policy, breaker, ("billing",), Memory)
    assert n.guarded
    assert n.private_keyword == "memory"
    assert not node(plain).guarded


def test_two_parameters_annotated_with_the_private_model_are_refused() -> None:
    def twice(state: S, *, a: Memory, b: Memory) -> dict[str, Any]:
        return {}

    with pytest.raises(GraphConfigError, match="2 parameters are annotated Memory"):
        node(twice, private_state=Memory)
