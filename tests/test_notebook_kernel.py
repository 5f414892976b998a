"""nodestep in a real Jupyter kernel: the Notebooks page's cells, and interrupting a cell.

The docs test runs the same cells in-process inside a running loop; here an ipykernel
process runs them as Jupyter does, one cell after another in one namespace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipykernel", reason="the notebook tests need the test extra (ipykernel)")
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from test_docs import NOTEBOOKS, _strip_one_newline

pytestmark = pytest.mark.slow


class Kernel:
    """A started kernel and its client; ``run`` executes one cell and returns its output."""

    def __init__(self, cwd: Path) -> None:
        self.manager: KernelManager
        self.client: BlockingKernelClient
        self.manager, self.client = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    def execute(self, code: str) -> str:
        """Send a cell without waiting for it; return its message id."""
        msg_id: str = self.client.execute(code)
        return msg_id

    def output(self, msg_id: str, timeout: float = 60, until: str | None = None) -> str:
        """Collect what the cell printed (and its error, as ``ERROR Name: message``).

        With ``until``, return as soon as the cell has printed that text, still running.
        """
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while until is None or until not in "".join(out):
            msg: dict[str, Any] = self.client.get_iopub_msg(timeout=deadline - time.monotonic())
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                out.append(content["text"])
            elif kind == "error":
                out.append(f"ERROR {content['ename']}: {content['evalue']}\n")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)
        return "".join(out)

    def run(self, code: str) -> str:
        return self.output(self.execute(code))

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    started = Kernel(tmp_path)
    try:
        yield started
    finally:
        started.close()


def test_the_notebooks_page_runs_in_a_real_kernel_as_it_shows(kernel: Kernel) -> None:
    cells = NOTEBOOKS["notebooks.md"]
    assert cells
    for cell in cells:
        printed = kernel.run(cell.code)
        assert "ERROR" not in printed, f"{cell.test_id}:\n{printed}"
        if cell.expected is not None:
            expected = _strip_one_newline(cell.expected)
            assert _strip_one_newline(printed) == expected, cell.test_id


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTEBOOK_FILES = sorted(EXAMPLES.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=[p.name for p in NOTEBOOK_FILES])
def test_an_example_notebook_runs_in_a_real_kernel_and_prints_its_saved_outputs(
    path: Path,
) -> None:
    # Run from examples/, as a user who opens the notebook there; the kernel starts each
    # notebook afresh, so no cell depends on another notebook's state.
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert cells, f"{path.name} has no code cell"
    kernel = Kernel(EXAMPLES)
    try:
        for number, cell in enumerate(cells, 1):
            printed = kernel.run("".join(cell["source"]))
            saved = "".join(
                "".join(out["text"]) for out in cell["outputs"] if out.get("name") == "stdout"
            )
            assert printed == saved, f"{path.name}, code cell {number}"
    finally:
        kernel.close()


SETUP = """
import anyio
from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node

gate = {"hold": True}

class Job(BaseState):
    done: bool = False

@node
async def work(state: Job) -> dict:
    print("work starts", flush=True)
    if gate["hold"]:
        await anyio.sleep(60)  # held until the interrupt; 60 s bounds one that never comes
    return {"done": True}

graph = Graph(Job, state_store=InMemoryStateStore()).flow(START >> work, work >> END)
print("ready")
"""


def test_interrupting_the_kernel_during_invoke_stops_the_run_where_it_stands(
    kernel: Kernel,
) -> None:
    assert kernel.run(SETUP) == "ready\n"
    msg_id = kernel.execute('graph.invoke({}, thread_id="job-1")')
    started = kernel.output(msg_id, until="work starts\n")  # the node runs on its loop
    kernel.manager.interrupt_kernel()
    printed = started + kernel.output(msg_id, timeout=20)
    assert printed.startswith("work starts\n")
    assert "ERROR KeyboardInterrupt" in printed

    after = kernel.run(
        'last = graph.history_sync("job-1").events[-1]\n'
        'print(last.type, last.data["reason"], graph.get_state_sync("job-1").status)\n'
        'gate["hold"] = False\n'
        'print(graph.invoke(None, thread_id="job-1").state)\n'
    )
    assert after == "run_stopped cancelled running\nwork starts\ndone=True\n"


PLAIN = """
import threading
from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node

released = threading.Event()

class Task(BaseState):
    done: bool = False

@node
def chore(state: Task) -> dict:  # a lone plain def: in a cell, it runs in a worker thread
    print("chore starts", flush=True)
    released.wait(60)  # held until the test lets it go; 60 s bounds one that never comes
    return {"done": True}

chores = Graph(Task, state_store=InMemoryStateStore()).flow(START >> chore, chore >> END)
print("ready")
"""


def test_interrupting_the_kernel_during_a_lone_plain_def_node_stops_the_run(
    kernel: Kernel,
) -> None:
    # Run inline, the node would block the run's loop: the cancel would come after it
    # returned, and the run would go on with its result.
    assert kernel.run(PLAIN) == "ready\n"
    msg_id = kernel.execute('chores.invoke({}, thread_id="chore-1")')
    started = kernel.output(msg_id, until="chore starts\n")
    kernel.manager.interrupt_kernel()
    printed = started + kernel.output(msg_id, timeout=20)
    assert "ERROR KeyboardInterrupt" in printed

    after = kernel.run(
        'print(chores.history_sync("chore-1").events[-1].type)\n'
        "released.set()\n"
        "import time; time.sleep(0.3)  # the node's thread ends; its result is not used\n"
        'print(chores.get_state_sync("chore-1").value.done)\n'
        'print(chores.invoke(None, thread_id="chore-1").state.done)\n'
    )
    assert after == "run_stopped\nFalse\nchore starts\nTrue\n"  # continued: it runs again
