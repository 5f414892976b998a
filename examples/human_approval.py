"""Human approval: a run pauses for a manager, and a second process resumes it.

Run it with ``python examples/human_approval.py``.

The first process files an expense claim. The graph checks it against the policy and,
since the amount needs a manager's approval, pauses in ``ask_manager`` with a question.
The first process prints the question and is done with the thread: everything about it is
in the history file. It then starts a second process (this script, with
``--resume PATH``), as a web request or a worker would be started days later. That process
opens the same ``FilesystemStateStore`` file, answers the question with ``Resume``, and
the run goes on where it stopped.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    Resume,
    add,
    interrupt,
    node,
    when,
)

THREAD = "expense-42"
APPROVAL_LIMIT = 100


class Expense(BaseState):
    employee: str = ""
    amount: int = 0
    status: str = "submitted"
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def check_policy(state: Expense) -> dict:
    if state.amount > APPROVAL_LIMIT:
        return {"log": [f"{state.amount} EUR is over {APPROVAL_LIMIT} EUR: needs approval"]}
    return {"log": ["within policy"]}


@node
def ask_manager(state: Expense) -> dict:
    # The run pauses here. When it is resumed, the node runs again from the top and
    # interrupt() returns the manager's answer.
    answer = interrupt(
        {"question": "Approve this expense?", "employee": state.employee, "amount": state.amount},
        id="approval",
    )
    status = "approved" if answer["approved"] else "rejected"
    return {"status": status, "log": [f"{status} by {answer['by']}"]}


@node
def pay(state: Expense) -> dict:
    return {"status": "paid", "log": [f"paid {state.amount} EUR to {state.employee}"]}


def needs_approval(state: Expense) -> bool:
    return state.amount > APPROVAL_LIMIT


def approved(state: Expense) -> bool:
    return state.status == "approved"


def build_graph(path: Path) -> Graph[Expense]:
    """Build the graph on the history file; both processes build the same one."""
    return Graph(Expense, name="expenses", state_store=FilesystemStateStore(path)).flow(
        START >> check_policy,
        check_policy >> when(needs_approval, ask_manager, otherwise=pay),
        ask_manager >> when(approved, pay, otherwise=END),
        pay >> END,
    )


def first_process() -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "approvals.jsonl"
        graph = build_graph(path)

        result = graph.invoke({"employee": "Ada", "amount": 240}, thread_id=THREAD)
        print(f"[process 1] status: {result.status}")
        for key, pending in result.interrupts.items():
            print(f"[process 1] waiting on {key}: {pending.payload}")
        print("[process 1] done with the thread; starting process 2")

        # Flush before the child writes to the same stdout, so the lines stay in order.
        sys.stdout.flush()
        script = os.path.abspath(__file__)
        subprocess.run([sys.executable, script, "--resume", str(path)], check=True)


def second_process(path: Path) -> None:
    graph = build_graph(path)

    snapshot = asyncio.run(graph.get_state(THREAD))
    waiting = list(snapshot.interrupts)
    print(f"[process 2] thread {THREAD} is {snapshot.status}, waiting on {waiting}")

    answer = {"approved": True, "by": "Grace"}
    result = graph.invoke(None, thread_id=THREAD, resume=Resume(answer))
    print(f"[process 2] status: {result.status}")
    print(f"[process 2] state: {result.state.status}, {result.state.amount} EUR")
    for line in result.state.log:
        print(f"[process 2] log: {line}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--resume":
        second_process(Path(sys.argv[2]))
    else:
        first_process()
