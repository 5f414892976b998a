"""The ``_sync`` forms come from one declaration each: ``x_sync = sync_form(x)``.

Every async thread method of ``Graph`` has one, with the async method's parameters, its
awaited result as the return, its name; each runs in plain code and inside a running
event loop, and a form of an ``async_call`` method never warns that it was not awaited.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import subprocess
import sys
from typing import Any

import anyio
import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node
from nodestep._graph.async_call import AsyncCall, async_call
from nodestep._graph.sync_form import sync_form

THREAD_METHODS = (
    "exists",
    "history",
    "load",
    "get_state",
    "state_history",
    "update_state",
    "migrate",
    "fork",
    "branches",
    "list_threads",
    "delete_thread",
    "prune",
    "node_state",
    "subgraph_state",
    "usage",
    "provenance",
    "diff",
)


def _is_async(value: Any) -> bool:
    return inspect.iscoroutinefunction(inspect.unwrap(value))


def test_the_thread_methods_are_the_async_methods_of_graph() -> None:
    async_methods = {
        n for n in dir(Graph) if not n.startswith("_") and _is_async(getattr(Graph, n))
    }
    # ``ainvoke`` is a run, not a thread method; its sync form is ``invoke``.
    assert async_methods - {"ainvoke"} == set(THREAD_METHODS)


@pytest.mark.parametrize("name", THREAD_METHODS)
def test_every_thread_method_has_a_sync_form_with_its_parameters(name: str) -> None:
    method = getattr(Graph, name)
    form = getattr(Graph, f"{name}_sync")
    awaited = inspect.signature(inspect.unwrap(method))
    assert inspect.signature(form) == awaited
    assert form.__name__ == f"{name}_sync"
    assert form.__qualname__ == f"{method.__qualname__}_sync"
    assert form.__module__ == method.__module__
    assert (form.__doc__ or "").startswith(f"Run ``{name}`` from sync code; see ``{name}``")
    assert not inspect.iscoroutinefunction(form)


def test_every_sync_form_belongs_to_an_async_method() -> None:
    forms = [n for n in dir(Graph) if n.endswith("_sync") and not n.startswith("_")]
    assert sorted(forms) == sorted(f"{n}_sync" for n in THREAD_METHODS)


def test_a_sync_form_returns_what_awaiting_gives_and_its_async_call_stays_a_coroutine() -> None:
    # The four methods that guard a forgotten ``await`` show a coroutine as their return;
    # their sync forms show the awaited value, as the others do.
    for name in ("exists", "update_state", "migrate", "fork"):
        shown = inspect.signature(getattr(Graph, name)).return_annotation
        form = inspect.signature(getattr(Graph, f"{name}_sync")).return_annotation
        assert shown == f"Coroutine[Any, Any, {form}]"
    assert inspect.signature(Graph.exists_sync).return_annotation == "bool"
    assert inspect.signature(Graph.get_state_sync).return_annotation == "StateSnapshot[S]"
    bound = inspect.signature(Graph(Counter).get_state_sync)
    assert list(bound.parameters) == ["thread_id", "at", "branch_id", "state_store"]


# -- the mechanism on a class of its own ---------------------------------------------------


class Doubler:
    def __init__(self) -> None:
        self.calls = 0

    async def double(self, x: int, *, plus: int = 0) -> int:
        """Return twice ``x``, plus ``plus``."""
        self.calls += 1
        await anyio.sleep(0)
        return 2 * x + plus

    @async_call
    async def checked(self, x: int) -> int:
        if x < 0:
            raise ValueError(f"x must be 0 or more, got {x}")
        return x

    double_sync = sync_form(double)
    checked_sync = sync_form(checked)


def test_a_sync_form_runs_its_method_in_plain_code() -> None:
    doubler = Doubler()
    assert doubler.double_sync(3, plus=1) == 7
    assert doubler.checked_sync(4) == 4
    assert doubler.calls == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_sync_form_runs_inside_a_running_event_loop(backend: str) -> None:
    doubler = Doubler()

    async def main() -> tuple[int, int]:
        # A blocking call from async code, as in a notebook cell: it goes to a worker.
        return doubler.double_sync(5), doubler.checked_sync(6)

    assert anyio.run(main, backend=backend) == (10, 6)


def test_a_sync_form_raises_what_the_method_raises() -> None:
    with pytest.raises(ValueError, match="x must be 0 or more, got -1"):
        Doubler().checked_sync(-1)


def test_an_async_call_awaited_gives_its_value_and_its_sync_form_does_not_warn() -> None:
    # pytest turns warnings into errors here, so a "never awaited" warning would fail.
    doubler = Doubler()
    pending = doubler.checked(2)
    assert isinstance(pending, AsyncCall)
    assert asyncio.run(pending) == 2
    for _ in range(3):
        assert doubler.checked_sync(3) == 3


def test_an_async_call_awaited_with_a_bad_argument_raises_and_does_not_warn() -> None:
    # pytest turns warnings into errors here: a "never awaited" warning would fail.
    async def main() -> None:
        with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
            await Doubler().checked(2, bogus=1)  # type: ignore[call-arg]

    asyncio.run(main())
    gc.collect()


def test_a_sync_form_keeps_the_signature_and_names_its_method() -> None:
    assert str(inspect.signature(Doubler.double_sync)) == str(inspect.signature(Doubler.double))
    assert inspect.signature(Doubler().double_sync).parameters.keys() == {"x", "plus"}
    assert (
        str(inspect.signature(Doubler.checked)) == "(self, x: 'int') -> 'Coroutine[Any, Any, int]'"
    )
    assert str(inspect.signature(Doubler.checked_sync)) == "(self, x: 'int') -> 'int'"
    assert Doubler.double_sync.__qualname__ == "Doubler.double_sync"


# -- on a graph ------------------------------------------------------------------------------


class Counter(BaseState):
    n: int = 0


@node
def bump(state: Counter) -> dict:
    return {"n": state.n + 1}


def test_the_sync_forms_of_a_graph_work_in_plain_code_and_inside_a_loop() -> None:
    graph = Graph(Counter, state_store=InMemoryStateStore()).flow(START >> bump, bump >> END)
    graph.invoke({}, thread_id="t")

    def sync_answers() -> list[Any]:
        return [
            graph.exists_sync("t"),
            graph.get_state_sync("t").value,
            [t.thread_id for t in graph.list_threads_sync().threads],
            graph.state_history_sync("t").steps[-1].snapshot.value,
        ]

    async def inside() -> list[Any]:
        return sync_answers()

    expected = [True, Counter(n=1), ["t"], Counter(n=1)]
    assert sync_answers() == expected
    assert asyncio.run(inside()) == expected


# -- what mypy sees --------------------------------------------------------------------------

TYPED_USE = """
from typing import Any, Coroutine

from nodestep import BaseState, Graph, StateSnapshot


class Log(BaseState):
    n: int = 0


graph = Graph(Log)
found: bool = graph.exists_sync("t")
pending: Coroutine[Any, Any, bool] = graph.exists("t")
snapshot: StateSnapshot[Log] = graph.get_state_sync("t", None, branch_id="main")
event_id: str = graph.update_state_sync("t", Log(), as_node="a")
count: int = graph.prune_sync("t", keep_last=3)
wrong: str = graph.exists_sync("t")  # error
other: StateSnapshot[BaseState] = graph.get_state_sync("t")  # error
graph.get_state_sync("t", branch="main")  # error
graph.fork_sync("t")  # error
graph.update_state_sync("t", 3)  # error
"""


@pytest.mark.slow
def test_mypy_sees_the_parameters_and_results_of_the_sync_forms(tmp_path: Any) -> None:
    # mypy runs in a process of its own: ``mypy.api.run`` in this one raises the recursion
    # limit to 16,384 and leaves it so for every test after this one.
    limit = sys.getrecursionlimit()
    module = tmp_path / "typed_use.py"
    module.write_text(TYPED_USE)
    args = ["--strict", "--cache-dir", str(tmp_path / "cache"), str(module)]
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *args], capture_output=True, text=True, check=False
    )
    out = run.stdout
    assert sys.getrecursionlimit() == limit
    flagged = {int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line}
    lines = TYPED_USE.splitlines()
    expected = {n for n, line in enumerate(lines, start=1) if line.endswith("# error")}
    assert flagged == expected, out
