"""Write examples/displays.ipynb: the notebook displays' cells, executed in a real kernel.

Run it after changing a display (``.venv/bin/python scripts/make_displays_notebook.py``);
tests/display/test_notebook_displays.py runs the notebook again and compares each
output with the one saved here. Ids and clocks are injected in the cells, so the
outputs are the same on every run.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CELLS = [
    """\
from typing import Annotated

from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    InMemoryStateStore,
    Resume,
    add,
    interrupt,
    node,
    when,
)
from nodestep.testing import sequential_ids, ticking_clock


class Review(BaseState):
    notes: Annotated[list[str], add] = Field(default_factory=list)
    score: int = 0
    verdict: str = ""


@node
def read(state: Review) -> dict:
    return {"notes": ["read"], "score": len(state.notes)}


@node
def plan(state: Review) -> dict:
    return {"notes": ["two checks"]}


# async: the two checks finish in the order they start, so each run of this notebook
# records the same history.
@node
async def style(state: Review) -> dict:
    return {"notes": ["style ok"]}


@node
async def facts(state: Review) -> dict:
    return {"notes": ["facts ok"]}


@node
def decide(state: Review) -> dict:
    answer = interrupt({"question": "Publish?", "notes": state.notes}, id="publish")
    return {"verdict": str(answer)}


store = InMemoryStateStore()
graph = Graph(
    Review,
    name="review",
    state_store=store,
    id_factory=sequential_ids(),
    clock=ticking_clock(1_765_000_000.0, 0.5),
).flow(
    START >> read,
    read >> when("score > 9", END, otherwise=plan),
    plan >> [style, facts],
    [style, facts] >> decide,
    decide >> END,
)
graph""",
    """\
result = graph.invoke({"notes": ["<script>alert('hi')</script>"]}, thread_id="essay-1")
result""",
    "result.interrupt",
    """\
graph.invoke(None, thread_id="essay-1", resume=Resume("yes"))
history = graph.state_history_sync("essay-1")
history""",
    "history.page(2, size=4)",
    'graph.get_state_sync("essay-1")',
    'graph.fork_sync("essay-1", from_=history[3].event.id, name="second-look")',
    "store",
    '''\
import tempfile
from pathlib import Path

from nodestep import Agent, ScriptedModel

specs = Path(tempfile.mkdtemp()) / "tea"
specs.mkdir()
(specs / "chat.yaml").write_text("""
kind: LLMNode
name: chat
prompts:
  system:
    en: You answer questions about tea in one sentence.
""")
agent = Agent(specs, start_node="chat", llm=ScriptedModel(["Green tea is not oxidised."]))
agent''',
    'agent.step_sync("What is green tea?", execution_id="tea-1")',
]


def build() -> nbformat.NotebookNode:
    """Return the notebook, executed in a python3 kernel started in examples/."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    for number, cell in enumerate(notebook.cells, 1):
        cell.id = f"cell-{number}"  # the same ids on every run, so a diff shows outputs only
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    where = {"metadata": {"path": str(EXAMPLES)}}
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources=where).execute()
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # the kernel's timings: new on every run
    return notebook


if __name__ == "__main__":
    nbformat.write(build(), EXAMPLES / "displays.ipynb")
    print(f"wrote {EXAMPLES / 'displays.ipynb'}")
