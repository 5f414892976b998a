"""``RunOptions``: the keyword arguments of every way to run a graph, written once.

``run_request`` checks one call's options and turns them into the engine's
``RunRequest``; ``with_subgraphs`` adds the ``subgraphs=`` of the streaming calls.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypedDict

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.history_ops import check_branch_id, check_thread_id, refuse_odd_id
from nodestep._engine.interrupts import Resume
from nodestep._engine.request import RunRequest
from nodestep._errors import GraphConfigError
from nodestep._flow.context import NO_CONTEXT
from nodestep._flow.credentials import CredentialsProvider
from nodestep._flow.nodes import Node
from nodestep._flow.routing import Command
from nodestep._graph.idioms import config_keyword_error
from nodestep._memory.contract import MemoryStore
from nodestep._numbers import is_finite_number, shown_number
from nodestep.store import StateStore

__all__ = ["RunOptions", "check_memory", "node_names", "run_request", "with_subgraphs"]


class RunOptions(TypedDict, total=False):
    """The keyword arguments ``invoke``, ``ainvoke``, ``stream`` and ``astream`` all take.

    Attributes:
        thread_id: The thread; required with a state store, generated without one.
        branch_id: The history branch, ``"main"`` unless forked.
        resume: ``Resume(...)``: answers to a paused thread's interrupts.
        context: Call-time data for nodes (``ctx.context``); never stored.
        state_store: A store for this call; it wins over the graph's.
        interrupt_before: Nodes to pause before, for this call (instead of the graph's).
        interrupt_after: Nodes to pause after, for this call (instead of the graph's).
        request_key: Your key for this call, e.g. the id of the message or order it
            handles: a retry with the same key never applies the input (or the resume's
            answers, or the continuation) twice (see "Retrying a run safely" in the
            persistence docs). Needs a state store.
        wait_for_thread: Seconds to wait while another run holds the thread; ``None``
            (the default) refuses at once with ``ThreadBusyError``. Needs a state store.
        credentials: A ``CredentialsProvider`` that resolves the roles nodes declare
            (``ctx.credentials(role)``); like ``context``, it is never stored.
        memory: A ``MemoryStore`` for this call's nodes (``ctx.memory``); it wins over
            the graph's. Never stored in the history.
        max_steps: The superstep limit of this call, instead of the graph's
            ``max_steps``; subgraphs keep their own.
    """

    thread_id: str | None
    branch_id: str
    resume: Resume | None
    context: Any
    state_store: StateStore | None
    interrupt_before: Sequence[Node | str] | None
    interrupt_after: Sequence[Node | str] | None
    request_key: str | None
    wait_for_thread: float | None
    credentials: CredentialsProvider | None
    memory: MemoryStore | None
    max_steps: int | None


OPTION_NAMES = frozenset(RunOptions.__annotations__)


def node_names(nodes: Iterable[Node | str] | Node | str | None, what: str) -> frozenset[str]:
    """Return the names of ``nodes`` (nodes or names), as a breakpoint setting gives them."""
    if nodes is None:
        return frozenset()
    if isinstance(nodes, Node | str):
        nodes = [nodes]
    out = set()
    for n in nodes:
        if isinstance(n, Node):
            out.add(n.name)
        elif isinstance(n, str):
            out.add(n)
        else:
            raise TypeError(f"{what} takes nodes or node names, got {n!r}.")
    return frozenset(out)


def run_request(
    graph: CompiledGraph,
    default_store: StateStore | None,
    method: str,
    input: Any,
    options: Mapping[str, Any],
    modes: frozenset[str] = frozenset(),
    *,
    memory: MemoryStore | None = None,
) -> RunRequest:
    """Check one call's options and return the engine's request, graph defaults filled in.

    Raises:
        TypeError: an option that does not exist (the message suggests the closest name).
        GraphConfigError: an option with a value it cannot take.
    """
    unknown = [name for name in options if name not in OPTION_NAMES]
    if unknown:
        raise config_keyword_error(method, options.get("config")) or _unknown_option(
            method, unknown[0]
        )
    thread_id = options.get("thread_id")
    if thread_id is not None:
        check_thread_id(thread_id)
    branch_id = options.get("branch_id", "main")
    check_branch_id(branch_id)
    store = options.get("state_store")
    if store is None:
        store = default_store
    resume = options.get("resume")
    if isinstance(input, Command):
        input, resume = None, command_answers(input, resume, method)
    if store is None:
        _check_storeless(graph, method, input, resume, branch_id, thread_id)
    request_key = options.get("request_key")
    wait = options.get("wait_for_thread")
    if request_key is not None or wait is not None:
        _check_keyed(graph, method, store, request_key, wait)
    return RunRequest(
        input=input,
        thread_id=thread_id,
        branch_id=branch_id,
        resume=resume,
        context=options.get("context", NO_CONTEXT),
        store=store,
        modes=modes,
        interrupt_before=_breakpoints(graph, options, "interrupt_before"),
        interrupt_after=_breakpoints(graph, options, "interrupt_after"),
        request_key=request_key,
        wait_for_thread=None if wait is None else float(wait),
        credentials=_credentials(options.get("credentials")),
        memory=check_memory(options.get("memory")) or memory,
        max_steps=_max_steps(method, options.get("max_steps")),
    )


def _max_steps(method: str, steps: Any) -> int | None:
    """Return a call's ``max_steps``, ``None`` for the graph's.

    Raises:
        GraphConfigError: not a whole number of at least 1.
    """
    if steps is None:
        return None
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise GraphConfigError(
            f"{method}(max_steps=...) takes a whole number of supersteps of at least 1, "
            f"got {steps!r}; leave it out to use the graph's max_steps."
        )
    return steps


def with_subgraphs(req: RunRequest, subgraphs: Any) -> RunRequest:
    """Return the stream's request, with the events of subgraph runs when asked for.

    Raises:
        TypeError: ``subgraphs`` is not a bool.
    """
    if not isinstance(subgraphs, bool):
        raise TypeError(f"stream(subgraphs=...) takes True or False, got {subgraphs!r}.")
    return replace(req, subgraphs=True) if subgraphs else req


def _credentials(provider: Any) -> CredentialsProvider | None:
    if provider is None or isinstance(provider, CredentialsProvider):
        return provider
    raise GraphConfigError(
        f"credentials= takes a CredentialsProvider, got {type(provider).__name__}: wrap a "
        f"mapping of roles to secrets as CredentialsProvider({{...}}), or subclass it."
    )


def check_memory(memory: Any) -> MemoryStore | None:
    """Return ``memory`` (a ``MemoryStore`` or ``None``), or refuse it.

    Raises:
        GraphConfigError: anything else.
    """
    if memory is None or isinstance(memory, MemoryStore):
        return memory
    raise GraphConfigError(
        f"memory= takes a MemoryStore, got {type(memory).__name__}: open one with "
        f"nodestep.memory.open_memory('sqlite:///memory.db'), or InMemoryMemoryStore()."
    )


def _check_keyed(
    graph: CompiledGraph, method: str, store: StateStore | None, request_key: Any, wait: Any
) -> None:
    """Refuse a ``request_key=`` or ``wait_for_thread=`` that cannot work.

    Raises:
        GraphConfigError: either one without a state store; a key that is not a non-empty
            string, or that no store can keep (``odd_character``); a wait that is not
            seconds, 0 or more.
    """
    name = "request_key" if request_key is not None else "wait_for_thread"
    if store is None:
        raise GraphConfigError(
            f"{method}({name}=...) works on a stored thread, but graph '{graph.name}' has no "
            f"state store. Pass state_store=... to Graph(...) or to this call, or leave "
            f"{name} out."
        )
    if request_key is not None and (not isinstance(request_key, str) or not request_key):
        raise GraphConfigError(
            f"request_key must be a non-empty string, got {request_key!r}: a key of the "
            f"call, such as the id of the message or order the run handles."
        )
    # The key is stored and indexed with the thread's ids, so the same text rules hold:
    # else one store keeps it and another fails on it, after the call began its run.
    if request_key is not None:
        refuse_odd_id(
            request_key,
            "request_key",
            "Use other text, such as the id of the message or order the run handles.",
        )
    if wait is not None and not (is_finite_number(wait) and wait >= 0):
        raise GraphConfigError(
            f"wait_for_thread takes the seconds to wait while another run holds the thread "
            f"(a finite number, 0 or more), got {shown_number(wait)}."
        )


def _check_storeless(
    graph: CompiledGraph,
    method: str,
    input: Any,
    resume: Any,
    branch_id: str,
    thread_id: str | None,
) -> None:
    """Refuse what only a stored thread can mean, instead of running from the defaults.

    A ``thread_id`` without a store would name a thread that is never kept: the next call
    with the same id would start from the defaults again, without a word.

    Raises:
        GraphConfigError: ``input=None`` (continue), a ``thread_id`` or a branch other
            than ``"main"`` without a state store.
    """
    where = (
        f"graph '{graph.name}' has no state store, so it keeps no threads. Pass "
        f"state_store=... to Graph(...) or to this call, with a thread_id"
    )
    if input is None and resume is None:
        raise GraphConfigError(
            f"{method}(None) continues a stored thread, but {where}; or pass input to "
            f"start a run ({{}} starts from the defaults)."
        )
    if branch_id != "main":
        raise GraphConfigError(
            f"{method}(branch_id={branch_id!r}) runs on a forked branch of a stored "
            f"thread, but {where}; or leave branch_id out."
        )
    if thread_id is not None:
        raise GraphConfigError(
            f"{method}(thread_id={thread_id!r}) names a thread to keep, but graph "
            f"'{graph.name}' has no state store, so a run keeps nothing: the next call "
            f"with that id would start from the defaults again. A thread needs a store: "
            f"pass state_store=... (e.g. InMemoryStateStore()) to Graph(...) or to this "
            f"call; or leave thread_id out (the result gets a new id)."
        )


def command_answers(command: Command, resume: Any, method: str) -> Resume:
    """Return the ``Resume`` a ``Command(resume=...)`` given as input stands for.

    Raises:
        GraphConfigError: the command has no ``resume=``, has ``update=`` or ``goto=`` too,
            or the call also passes ``resume=``.
    """
    if command.resume is None or command.update is not None or command.goto is not None:
        raise GraphConfigError(
            f"{method}() takes a Command as input only to answer a paused thread, as "
            f"Command(resume=answer); got {command!r}. Change the state with "
            f"update_state(thread_id, values) first; a node returns Command(update=..., "
            f"goto=...)."
        )
    if resume is not None:
        raise GraphConfigError(
            f"{method}() got Command(resume=...) as input and resume= as well; give the "
            f"answers once, in either."
        )
    answers = command.resume
    return answers if isinstance(answers, Resume) else Resume(answers)


def _breakpoints(graph: CompiledGraph, options: Mapping[str, Any], what: str) -> frozenset[str]:
    given = options.get(what)
    if given is None:
        return graph.interrupt_before if what == "interrupt_before" else graph.interrupt_after
    names = node_names(given, what)
    unknown = sorted(names - set(graph.nodes))
    if unknown:
        raise GraphConfigError(
            f"{what} names {', '.join(repr(n) for n in unknown)}, which graph "
            f"'{graph.name}' does not have. Its nodes: {', '.join(graph.nodes)}."
        )
    return names


def _unknown_option(method: str, name: str) -> TypeError:
    close = difflib.get_close_matches(name, sorted(OPTION_NAMES), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(OPTION_NAMES))
    return TypeError(
        f"{method}() got an unexpected keyword argument {name!r}.{hint} It takes: {known}."
    )
