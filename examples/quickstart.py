"""Quickstart: a two-node graph that completes an order and prices it.

Run it with ``python examples/quickstart.py``.
"""

from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, add, node

PRICES = {"tea": 3, "soup": 6, "cake": 4}


class Order(BaseState):
    # ``add`` is a reducer: each update to ``items`` is appended to the list.
    items: Annotated[list[str], add] = Field(default_factory=list)
    # Fields without a reducer are replaced by each update.
    total: int = 0
    status: str = "new"


@node
def add_dessert(state: Order) -> dict:
    return {"items": ["cake"], "status": "dessert added"}


@node
def price(state: Order) -> dict:
    total = sum(PRICES[item] for item in state.items)
    return {"total": total, "status": "priced"}


graph = Graph(Order).flow(
    START >> add_dessert,
    add_dessert >> price,
    price >> END,
)


def main() -> None:
    result = graph.invoke({"items": ["tea", "soup"]})
    print(result.state)
    print(f"{len(result.state.items)} items, total {result.state.total}")


if __name__ == "__main__":
    main()
