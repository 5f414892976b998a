"""Time travel: read a thread's history, look at an earlier state, and fork from it.

Run it with ``python examples/time_travel.py``.

A recipe thread gets three turns, each adding an ingredient. The script prints the
history, loads the state as it was after the first turn, forks a branch there and takes it
another way. The main branch is left as it was.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, add, node


class Recipe(BaseState):
    ingredients: Annotated[list[str], add] = Field(default_factory=list)
    title: str = ""


@node
def name_it(state: Recipe) -> dict:
    return {"title": " and ".join(state.ingredients).capitalize() + " cake"}


graph = Graph(Recipe, name="recipes", state_store=InMemoryStateStore()).flow(
    START >> name_it,
    name_it >> END,
)


async def main() -> None:
    for ingredient in ["apple", "cinnamon", "walnut"]:
        result = await graph.ainvoke({"ingredients": [ingredient]}, thread_id="cake")
        print(f"turn: {result.state.title}")

    print("-- history of the main branch")
    history = await graph.history("cake")
    for event in history.events:
        print(f"{event.sequence:>2} {event.type}")
    print("checkpoints at:", [event.sequence for event in history.checkpoints])

    print("-- the state after the first turn")
    first_turn = next(event for event in history.events if event.type == "run_completed")
    print(await graph.load("cake", at=first_turn.id))
    snapshot = await graph.get_state("cake", at=first_turn.id)
    print(f"event {snapshot.sequence}: {snapshot.status}, title {snapshot.value.title!r}")

    print("-- fork there, and take the branch another way")
    branch = await graph.fork("cake", from_=first_turn.id, name="pear")
    print(f"branch {branch.id!r} from {branch.parent_id!r} after event {branch.from_sequence}")
    result = await graph.ainvoke({"ingredients": ["pear"]}, thread_id="cake", branch_id="pear")
    print(f"pear branch: {result.state.title}")
    pear_history = await graph.history("cake", branch_id="pear")
    print("pear branch events:", [(e.sequence, e.type) for e in pear_history.events])

    print("-- the main branch is unchanged")
    print("main:", (await graph.get_state("cake")).value.title)
    print("branches:", [b.id for b in await graph.branches("cake")])


if __name__ == "__main__":
    asyncio.run(main())
