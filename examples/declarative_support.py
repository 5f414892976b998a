"""A graph declared in YAML: seed 002's `when:` conditions, and an error route.

The manifests in support_desk/specs/ name the state class and node functions by import
path; conditions route between them. One business rule is registered by name, since a
condition never imports code. Each scenario drives the Process node a different way.
"""

from pathlib import Path

from support_desk.nodes import Caller, User, validate_transaction

from nodestep import InMemoryStateStore, load_graph
from nodestep.testing import sequential_ids

SPECS = Path(__file__).parent / "support_desk" / "specs"

store = InMemoryStateStore()
graph = load_graph(
    SPECS,
    functions={"business_rules.validate_transaction": validate_transaction},
    allowed_packages=["support_desk"],
    state_store=store,
    id_factory=sequential_ids(),
)

scenarios = [
    ("ok", {}, "free"),
    ("flaky", {}, "free"),
    ("payment", {"amount": 250.0}, "free"),
    ("locked", {}, "free"),
    ("slow", {}, "free"),
    ("vip", {}, "enterprise"),
    ("vip", {}, "free"),
]
for scenario, extra, tier in scenarios:
    thread = f"{scenario}-{tier}"
    result = graph.invoke(
        {"scenario": scenario, **extra},
        thread_id=thread,
        context=Caller(user=User(tier=tier)),
    )
    print(f"{thread:14} {result.status:9} {' -> '.join(result.state.log)}")

# The routed failure is in the history: the task's result records it.
for event in graph.history_sync("slow-free").events:
    if event.type != "superstep_completed":
        continue
    for task in event.data["tasks"].values():
        if "failed" in task:
            print("recorded:", task["failed"], "routed to", task["routes"])
