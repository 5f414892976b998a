"""Which a name is: a registered function wins over a state field and over the context."""

from __future__ import annotations

from typing import Any

from nodestep import BaseState, Condition
from nodestep._conditions.env import Env


class Order(BaseState):
    vip: bool = False


def test_a_registered_function_wins_over_a_state_field_of_the_same_name():
    compiled = Condition("vip").compile(Order, functions={"vip": lambda state: True})
    assert compiled.holds(Env(Order(vip=False)))


def test_a_registered_function_wins_over_an_open_dict_context():
    calls: list[Any] = []

    def is_vip(state: Any) -> bool:
        calls.append(state)
        return True

    compiled = Condition("rules.is_vip").compile(
        Order, context=dict, functions={"rules.is_vip": is_vip}
    )
    assert compiled.holds(Env(Order(), {"rules": {"is_vip": False}}))
    assert calls == [Order()]


def test_without_a_function_an_open_dict_context_is_read_by_name():
    compiled = Condition("rules.is_vip").compile(Order, context=dict)
    assert not compiled.holds(Env(Order(), {"rules": {"is_vip": False}}))
