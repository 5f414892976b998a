"""Map-reduce: one task per chunk with ``Send``, a join, and a deferred summary.

Run it with ``python examples/map_reduce.py``.

``split`` cuts the text into chunks and sends one ``count`` task per chunk. Each task gets
its chunk as a ``Chunk``, the input model ``count`` declares: ``index`` and ``words`` are
per-task fields, not fields of the shared state, and each payload is validated against
``Chunk`` when it is sent. ``split`` also starts ``title``, whose path is one node longer
(``title >> polish``). ``[count, polish] >> reduce`` is a join: ``reduce`` runs once, after
every ``count`` task and ``polish`` have run, although they finish in different supersteps.
``split`` asks for ``summary`` at once, but ``summary`` is deferred
(``@node(defer=True)``): it runs only when nothing else is left in the turn.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from nodestep import END, START, BaseState, Command, Graph, Send, add, merge_dict, node

TEXT = (
    "the tea is picked by hand the leaves wilt and roll and dry "
    "the tea is brewed with water just off the boil"
)


class Doc(BaseState):
    text: str = ""
    counts: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)
    title: str = ""
    top: list[str] = Field(default_factory=list)
    summary: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


class Chunk(BaseModel):
    """The input of one ``count`` task."""

    index: int
    words: list[str]


@node(goto=["count", "title", "summary"])
def split(state: Doc) -> Command:
    words = state.text.split()
    chunks = [words[i : i + 8] for i in range(0, len(words), 8)]
    sends = [Send(count, Chunk(index=i, words=c)) for i, c in enumerate(chunks)]
    return Command(update={"log": [f"split into {len(chunks)}"]}, goto=[*sends, title, summary])


@node
def count(state: Doc, chunk: Chunk) -> dict:
    tally: dict[str, int] = {}
    for word in chunk.words:
        tally[word] = tally.get(word, 0) + 1
    # merge_dict keeps the last value per key: each chunk writes its own keys.
    keyed = {f"{chunk.index}:{word}": n for word, n in tally.items()}
    return {"counts": keyed, "log": [f"counted chunk {chunk.index}"]}


@node
def title(state: Doc) -> dict:
    return {"title": " ".join(state.text.split()[:3]), "log": ["title"]}


@node
def polish(state: Doc) -> dict:
    return {"title": state.title.title(), "log": ["polish"]}


@node
def reduce(state: Doc) -> dict:
    totals: dict[str, int] = {}
    for key, n in state.counts.items():
        word = key.split(":", 1)[1]
        totals[word] = totals.get(word, 0) + n
    top = sorted(totals, key=lambda w: (-totals[w], w))[:3]
    return {"top": top, "log": ["reduce"]}


@node(defer=True)
def summary(state: Doc) -> dict:
    line = f"{state.title}: top words {', '.join(state.top)}"
    return {"summary": line, "log": ["summary"]}


graph = Graph(Doc, name="map_reduce").flow(
    START >> split,
    title >> polish,
    [count, polish] >> reduce >> END,
    summary >> END,
)


def main() -> None:
    print("-- supersteps")
    result = None
    for event in graph.stream({"text": TEXT}, stream_mode="updates"):
        if event.mode == "updates":
            print(event.step, event.task_id, (event.data or {}).get("log"))
        else:
            result = event.data
    assert result is not None
    print("-- result")
    print("top:", result.state.top)
    print("summary:", result.state.summary)


if __name__ == "__main__":
    main()
