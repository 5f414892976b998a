"""An answer a subgraph's node cannot take fails the run; a new answer replaces it there too.

The parent took the new answer (a failed thread whose interrupts were all answered takes
new ones), but the child, failed rather than paused, was continued with the answer it had
stored, so it failed again with the old answer however often it was answered anew.
"""

from __future__ import annotations

import pytest

from nodestep import END, START, BaseState, Graph, Resume, interrupt, node
from nodestep.store import StateStore
from store_helpers import reopened


class Count(BaseState):
    n: int = 0


@node
def ask(state: Count) -> dict[str, int]:
    return {"n": int(interrupt("how many?", id="n"))}


inner = Graph(Count, name="inner").flow(START >> ask, ask >> END)
middle = Graph(Count, name="middle").flow(START >> inner, inner >> END)


@pytest.mark.parametrize(("child", "key"), [(inner, "inner/ask:n"), (middle, "middle/inner/ask:n")])
def test_a_new_answer_replaces_one_a_subgraph_node_could_not_take(
    store: StateStore, child: Graph[Count], key: str
) -> None:
    def outer(store: StateStore) -> Graph[Count]:
        return Graph(Count, state_store=store).flow(START >> child, child >> END)

    assert list(outer(store).invoke({}, thread_id="t").interrupts) == [key]
    with pytest.raises(ValueError, match="'many'"):
        outer(store).invoke(None, thread_id="t", resume=Resume("many"))
    # Continuing gives the node the stored answer again.
    with pytest.raises(ValueError, match="'many'"):
        outer(reopened(store)).invoke(None, thread_id="t")
    snapshot = outer(reopened(store)).get_state_sync("t")
    assert (snapshot.status, list(snapshot.interrupts)) == ("failed", [key])
    result = outer(reopened(store)).invoke(None, thread_id="t", resume=Resume(answers={key: "7"}))
    assert (result.status, result.state.n) == ("completed", 7)
    assert outer(reopened(store)).get_state_sync("t").value.n == 7
