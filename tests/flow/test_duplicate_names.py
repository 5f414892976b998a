"""flow(): two nodes with one name are reported as that, not as the edge problems it causes."""

from __future__ import annotations

import pytest

from nodestep import END, START, BaseState, Graph, GraphConfigError, node


class S(BaseState):
    count: int = 0


@node
def a(state):
    return None


@node
def b(state):
    return None


@node
def c(state):
    return None


@node
def d(state):
    return None


@node(name="a")
def impostor(state):
    return None


COLLISION = "Two different nodes are named 'a'; give one of them another name with @node(name=...)"


def _problems(*edges) -> tuple[str, ...]:
    with pytest.raises(GraphConfigError, match="Graph 'poll' has an invalid flow") as info:
        Graph(S, name="poll").flow(*edges)
    return info.value.problems


def test_a_name_collision_is_reported_alone_not_as_two_edges_of_one_node():
    assert _problems(START >> a, a >> impostor, impostor >> END) == (COLLISION,)


def test_a_name_collision_is_reported_alone_not_as_a_join_source_with_another_edge():
    problems = _problems(START >> b, b >> [a, c], a >> END, [impostor, c] >> d, d >> END)
    assert problems == (COLLISION,)


def test_two_edges_of_another_node_are_still_reported_beside_a_name_collision():
    problems = _problems(START >> a, a >> impostor, impostor >> END, b >> a, b >> END)
    assert problems[0] == COLLISION
    assert any(p.startswith("Node 'b' has two edges") for p in problems)
    assert not any(p.startswith("Node 'a' has two edges") for p in problems)
