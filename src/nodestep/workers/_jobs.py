"""What a queued run carries, and how a worker finds the graph it names.

A job holds only JSON: the graph's import path, the thread and branch, its request key
(so a redelivered job counts once), and what the run does: new ``input``, ``resume``
answers, or neither (continue the thread, as ``invoke(None)``). The graph itself
is imported by each worker from the path, with the state store it was built with.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from typing import Any, Literal

from nodestep import Agent, Graph, GraphConfigError, Replace, Resume

__all__ = ["RunJob", "import_graph"]

Kind = Literal["input", "resume", "continue"]


@dataclass(frozen=True, slots=True)
class RunJob:
    """One queued run of a thread, as stored in the queue (JSON values only)."""

    graph: str
    thread_id: str
    branch_id: str
    kind: Kind
    input: Any = None
    request_key: str | None = None
    resume_value: Any = None
    resume_answers: dict[str, Any] | None = None
    store: str | None = None
    replaced: list[str] | None = None
    """The fields of ``input`` written with ``Replace``; ``None`` in a job queued by an
    older nodestep, whose ``input`` is the caller's own value rather than its stored form."""

    def to_kwargs(self) -> dict[str, Any]:
        """Return the job's task arguments."""
        kwargs = asdict(self)
        if self.replaced is None:  # a job a worker of an older nodestep can still read
            del kwargs["replaced"]
        return kwargs

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> RunJob:
        """Rebuild a job from its task arguments."""
        return cls(**kwargs)

    @classmethod
    def of_input(
        cls, graph: Graph[Any], path: str, thread_id: str, branch_id: str, input: Any, **fields: Any
    ) -> RunJob:
        """Return a run of ``input`` on ``graph`` (imported from ``path``), checked and stored.

        Checked here, where the caller can fix it, rather than in a worker's log; queued in
        its stored form, so a state instance, ``Replace(...)`` or a datetime travels as JSON
        and the worker rebuilds exactly what was checked (``run_input``).

        Raises:
            StateUpdateError: ``input`` does not fit the graph's state.
        """
        data, replaced = graph.schema.writes_to_json(graph.schema.validate_update(input, "input"))
        return cls(path, thread_id, branch_id, "input", input=data, replaced=replaced, **fields)

    def run_input(self, graph: Graph[Any]) -> Any:
        """Return the run's input as ``invoke`` takes it, from its stored (JSON) form."""
        if self.replaced is None:
            return self.input
        writes = graph.schema.writes_from_json(self.input, self.replaced)
        return {key: Replace(value) if replace else value for key, value, replace in writes}

    def resume(self) -> Resume | None:
        """Return the run's ``Resume``, or ``None`` for input and continuation runs."""
        if self.kind != "resume":
            return None
        if self.resume_answers is not None:
            return Resume(answers=self.resume_answers)
        return Resume(self.resume_value)

    @staticmethod
    def resume_fields(resume: Resume) -> dict[str, Any]:
        """Return the job fields that carry ``resume``, in the JSON form history stores.

        Raises:
            GraphConfigError: an answer has no JSON form.
        """
        if resume.answers is not None:
            return {"resume_answers": _json(dict(resume.answers), "Resume(answers=...)")}
        return {"resume_value": _json(resume.value, "Resume(value)")}


def _json(value: Any, what: str) -> Any:
    """Return ``value`` as JSON data (a date as its text, a model as a dict), as a run's
    answers are stored: the queue carries only JSON."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except (PydanticSerializationError, TypeError, ValueError) as error:
        raise GraphConfigError(
            f"{what} cannot be queued, as it has no JSON form: {error}. "
            f"Answer with JSON-friendly data: dicts, lists, text, numbers, dates, models."
        ) from None


def import_graph(path: str, *, stored: bool = True) -> Graph[Any]:
    """Return the ``Graph`` at ``path`` (``"package.module:name"``); an ``Agent``'s graph.

    A module is imported once per process (Python keeps it in ``sys.modules``); the
    attribute is looked up at every call, so ``"__main__:graph"`` names the running
    script's graph.

    Args:
        path: ``"package.module:name"``.
        stored: Refuse a graph without a state store of its own; ``False`` when the job
            names the store it runs on.

    Raises:
        GraphConfigError: the path is malformed, cannot be imported, names no ``Graph``,
            or names one without a state store (a queued run must be stored to be shared).
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise GraphConfigError(
            f"A queued graph is named by 'package.module:attribute', got {path!r}; "
            f"e.g. 'shop.graphs:orders'."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise GraphConfigError(
            f"Cannot import module {module_name!r} of graph {path!r}: {error}. The worker "
            f"imports it, so it must be importable where the worker runs (PYTHONPATH)."
        ) from error
    graph = getattr(module, attr, None)
    if isinstance(graph, Agent):  # an agent's runs are its graph's
        graph = graph.graph
    if not isinstance(graph, Graph):
        raise GraphConfigError(
            f"{path!r} names {type(graph).__name__ if graph is not None else 'nothing'}, "
            f"not a nodestep Graph; point it at the Graph object (or an Agent)."
        )
    if stored and graph.state_store is None:
        raise GraphConfigError(
            f"Graph {path!r} has no state store: queued runs are shared by workers through "
            f"the store, so build it with Graph(..., state_store=...)."
        )
    return graph
