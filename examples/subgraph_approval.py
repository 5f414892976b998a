"""Subgraph approval: a pause inside a subgraph, answered from a second process.

Run it with ``python examples/subgraph_approval.py``.

A newsroom graph drafts an article, runs a legal-review graph as one of its nodes, and
publishes. The legal-review graph has its own state class: ``subgraph(...)`` maps the
article in and the verdict back out. Its ``counsel`` node asks a lawyer to clear the
article with ``interrupt()``, which pauses the legal review and the newsroom run with it;
the pending interrupt's key names the path, ``legal/counsel:clearance``.

The first process prints the question and starts a second process (this script, with
``--resume PATH``). That process opens the same history file, shows where the thread
stands and the legal review's own events in the newsroom's history, and answers with
``Resume``: the legal review goes on from ``counsel`` (its ``scan`` step does not run
again), and then the newsroom publishes.
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
    subgraph,
)

THREAD = "article-7"
RISKY = ("allegedly", "fraud")


class Review(BaseState):
    text: str = ""
    flags: list[str] = Field(default_factory=list)
    cleared: bool = False
    note: str = ""


@node
def scan(state: Review) -> dict:
    print(f"  [legal] scanning {len(state.text.split())} words")
    return {"flags": [word for word in RISKY if word in state.text]}


@node
def counsel(state: Review) -> dict:
    if not state.flags:
        return {"cleared": True, "note": "nothing to check"}
    answer = interrupt({"flags": state.flags, "text": state.text}, id="clearance")
    return {"cleared": answer["cleared"], "note": f"{answer['by']}: {answer['note']}"}


legal_review = Graph(Review, name="legal_review").flow(
    START >> scan, scan >> counsel, counsel >> END
)


class Article(BaseState):
    headline: str = ""
    body: str = ""
    status: str = "draft"
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def draft(state: Article) -> dict:
    return {"body": f"{state.headline}: the mayor allegedly moved funds.", "log": ["drafted"]}


legal = subgraph(
    "legal",
    legal_review,
    state_in=lambda article: {"text": article.body},
    state_out=lambda review: {
        "status": "cleared" if review.cleared else "held",
        "log": [f"legal: {review.note}"],
    },
)


@node
def publish(state: Article) -> dict:
    if state.status != "cleared":
        return {"log": ["held back"]}
    return {"status": "published", "log": ["published"]}


def build_graph(path: Path) -> Graph[Article]:
    """Build the newsroom graph on the history file; both processes build the same one."""
    return Graph(Article, name="newsroom", state_store=FilesystemStateStore(path)).flow(
        START >> draft,
        draft >> legal,
        legal >> publish,
        publish >> END,
    )


def first_process() -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "newsroom.jsonl"
        graph = build_graph(path)

        result = graph.invoke({"headline": "City budget"}, thread_id=THREAD)
        print(f"[process 1] status: {result.status}")
        for key, pending in result.interrupts.items():
            print(f"[process 1] waiting on {key}: flags {pending.payload['flags']}")
        print("[process 1] starting process 2")

        # Flush before the child writes to the same stdout, so the lines stay in order.
        sys.stdout.flush()
        script = os.path.abspath(__file__)
        subprocess.run([sys.executable, script, "--resume", str(path)], check=True)


def second_process(path: Path) -> None:
    graph = build_graph(path)

    snapshot = asyncio.run(graph.get_state(THREAD))
    print(f"[process 2] thread {THREAD} is {snapshot.status} in {list(snapshot.next)}")
    history = asyncio.run(graph.history(THREAD))
    inside = [event.record["type"] for event in history.events if event.path == "legal"]
    print(f"[process 2] legal review so far: {inside}")

    answer = {"cleared": True, "by": "J. Doe", "note": "sourced, fine to run"}
    result = graph.invoke(None, thread_id=THREAD, resume=Resume(answer))
    print(f"[process 2] status: {result.status}, article {result.state.status}")
    for line in result.state.log:
        print(f"[process 2] log: {line}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--resume":
        second_process(Path(sys.argv[2]))
    else:
        first_process()
