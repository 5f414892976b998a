"""A YAML agent with resilient nodes, run for two turns in two processes.

The manifest in refund_desk/specs/ declares a greeter with private state, an order
lookup with a retry policy, and a refund behind a circuit breaker (with a role for its
credentials) whose failure an error route takes. The first process runs turn 1 on a
thread in a file store; then it starts a second process (this script again), which loads
the same manifest and runs turn 2 on the same thread. A fake clock makes every wait and
the breaker's cool-down take no time, so the output is the same on every run.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from refund_desk import nodes

from nodestep import CredentialsProvider, FilesystemStateStore, load_graph
from nodestep.testing import FakeTime

SPECS = Path(__file__).parent / "refund_desk" / "specs"
THREAD = "customer-42"


def run_turn(store_dir: str, process: int, message: str) -> None:
    fake = FakeTime()
    graph = load_graph(
        SPECS,
        allowed_packages=["refund_desk"],
        state_store=FilesystemStateStore(Path(store_dir) / "agent.jsonl"),
        clock=fake,
        sleep=fake.sleep,
    )
    before = len(graph.history_sync(THREAD).events) if process == 2 else 0
    result = graph.invoke(
        {"customer": "Alice", "message": message, "order_id": "A-1001"},
        thread_id=THREAD,
        credentials=CredentialsProvider({"payments": "sk-test-4242"}),
    )
    print(f"process {process}: {message!r}")
    print("  log:   ", " -> ".join(result.state.log[-4:]))
    print("  status:", result.state.status, "|", result.state.reply)
    for event in graph.history_sync(THREAD).events[before:]:
        data = event.data
        if event.type == "task_retried":
            print(
                f"  retried {data['node']} attempt {data['attempt']}: {data['error']}, "
                f"waited {data['delay']}s"
            )
        elif event.type == "breaker_changed":
            print(f"  breaker of {data['node']}: {data['state']}")
        elif event.type == "superstep_completed":
            for name, task in data["tasks"].items():
                if "failed" in task:
                    print(
                        f"  error route: {name} failed with {task['failed']['error']}, "
                        f"routed to {task['routes']}"
                    )
    print("  greet remembers:", graph.node_state_sync(THREAD, "greet"))
    print(f"  slept {fake.sleeps}; payments API called {nodes.payments.calls} times")


if len(sys.argv) == 3 and sys.argv[1] == "second":
    nodes.payments.up = True  # the service is back by the time the second process runs
    run_turn(sys.argv[2], 2, "Is my refund done?")
else:
    with tempfile.TemporaryDirectory() as store_dir:
        run_turn(store_dir, 1, "I want a refund for A-1001")
        second = subprocess.run(
            [sys.executable, __file__, "second", store_dir],
            capture_output=True,
            text=True,
            check=True,
        )
        print(second.stdout, end="")
