"""Three graphs nested three levels deep, for the subgraph tests and their child processes.

``desk`` (top) runs ``intake``, then the graph ``review`` as a node, then ``close``.
``review`` runs ``prep``, then the graph ``legal`` as a node. ``legal`` runs ``draft``,
``slow`` and ``sign``; ``sign`` asks for a signature with ``interrupt(id="sign")``, whose
key in the top run is ``"review/legal/sign:sign"``.

Every node appends its name to the ledger file named by ``$LEDGER`` (with ``O_APPEND``,
so lines of several processes never mix), which tells which nodes ran how often. ``slow``
prints ``slow is running`` when ``$SLOW_HOLDS`` is set, and then sleeps, so that a test
reading the process's output can kill it inside the innermost graph.

``joined`` runs ``draft`` and ``slow`` in a subgraph that is a join source beside
``quick``.
"""

from __future__ import annotations

import os
import time
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, add, interrupt, node
from nodestep.store import StateStore


class Doc(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    verdict: str = ""


def ledger(line: str) -> None:
    """Append ``line`` to the ledger file, if the environment names one."""
    path = os.environ.get("LEDGER")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@node
def draft(state: Doc) -> dict[str, list[str]]:
    ledger("draft")
    return {"log": ["draft"]}


@node
def slow(state: Doc) -> dict[str, list[str]]:
    ledger("slow")
    if os.environ.get("SLOW_HOLDS"):
        os.write(1, b"slow is running\n")  # one write: the main thread may print meanwhile
        time.sleep(60)  # held here until the test kills the process; 60 s bounds one that does not
    return {"log": ["slow"]}


@node
def sign(state: Doc) -> dict[str, object]:
    answer = interrupt({"pages": len(state.log)}, id="sign")
    ledger(f"sign {answer}")
    return {"log": [f"signed {answer}"], "verdict": answer}


@node
def prep(state: Doc) -> dict[str, list[str]]:
    ledger("prep")
    return {"log": ["prep"]}


@node
def intake(state: Doc) -> dict[str, list[str]]:
    ledger("intake")
    return {"log": ["intake"]}


@node
def close(state: Doc) -> dict[str, list[str]]:
    ledger("close")
    return {"log": ["close"]}


@node
def quick(state: Doc) -> dict[str, list[str]]:
    ledger("quick")
    return {"log": ["quick"]}


def joined(store: StateStore | None) -> Graph[Doc]:
    """Return a graph whose join waits on a subgraph: ``intake`` fans out to the graph
    ``drafting`` (``draft``, then ``slow``) and ``quick``; ``close`` joins them."""
    drafting = Graph(Doc, name="drafting").flow(START >> draft >> slow >> END)
    return Graph(Doc, name="joined", state_store=store).flow(
        START >> intake >> [drafting, quick], [drafting, quick] >> close >> END
    )


def desk(store: StateStore | None) -> Graph[Doc]:
    """Return the top graph on ``store``, with ``review`` and ``legal`` nested in it."""
    legal = Graph(Doc, name="legal").flow(START >> draft, draft >> slow, slow >> sign, sign >> END)
    review = Graph(Doc, name="review").flow(START >> prep, prep >> legal, legal >> END)
    return Graph(Doc, name="desk", state_store=store).flow(
        START >> intake, intake >> review, review >> close, close >> END
    )
