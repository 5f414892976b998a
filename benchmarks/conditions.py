"""Micro-benchmark: the cost of evaluating one ``when`` condition, per routing decision.

Each of seed 002's five conditions is compiled against a state (and a context type) as
``Graph.flow()`` compiles it, then evaluated on a fixed state the way the router does
after a superstep: one ``Env`` and one ``holds()`` call. It prints the median of several
timed rounds, in microseconds per evaluation, and the cost of a plain Python predicate
of the same test for comparison. The goal for the longest condition is under 2 us.

    python benchmarks/conditions.py            # full
    python benchmarks/conditions.py --quick    # fewer rounds
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from pydantic import BaseModel

from nodestep import BaseState
from nodestep._conditions.condition import Condition
from nodestep._conditions.env import Env


class User(BaseModel):
    tier: str = "free"


class Caller(BaseModel):
    user: User = User()


class Ticket(BaseState):
    status: str = ""
    failed: bool = False
    retry_count: int = 0
    priority: str = "normal"
    amount: float = 0.0
    urgent: bool = False
    customer_complaint: bool = False


def validate_transaction(t: Ticket) -> bool:
    return 0 < t.amount <= 10_000


SEED = [
    "status == 'complete'",
    "failed and (retry_count < 3 or priority == 'high')",
    "business_rules.validate_transaction",
    "$is_error('UnauthorizedError') or $is_error('TimeoutError')",
    "user.tier == 'enterprise' and (urgent == true or customer_complaint == true)",
]


def longest_in_python(state: Ticket, context: Caller) -> bool:
    return context.user.tier == "enterprise" and (
        state.urgent is True or state.customer_complaint is True
    )


def per_call_us(fn: Any, rounds: int, number: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - started) / number * 1e6)
    return statistics.median(samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    args = p.parse_args()
    rounds, number = (5, 20_000) if args.quick else (15, 100_000)
    functions = {"business_rules.validate_transaction": validate_transaction}
    state = Ticket(status="open", retry_count=1, amount=50.0, customer_complaint=True)
    context = Caller(user=User(tier="enterprise"))
    print(f"{'condition':80} {'us/eval':>8}")
    for text in SEED:
        compiled = Condition(text).compile(Ticket, context=Caller, functions=functions)

        def evaluate(compiled: Any = compiled) -> bool:
            return compiled.holds(Env(state, context))

        print(f"{text:80} {per_call_us(evaluate, rounds, number):8.3f}")
    python = per_call_us(lambda: longest_in_python(state, context), rounds, number)
    print(f"{'(the longest as a plain Python function)':80} {python:8.3f}")


if __name__ == "__main__":
    main()
