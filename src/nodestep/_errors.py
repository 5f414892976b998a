"""Every error nodestep raises, in one tree.

::

    NodestepError
    ├── GraphConfigError (ValueError)      the graph, a call or a store is set up wrongly
    │   ├── ConditionError                 a ``when`` condition that cannot work (with its place)
    │   └── MCPSchemaError                 an MCP tool's input schema cannot be used
    ├── GraphExecutionError (RuntimeError) a run went wrong in a way that is not a node's own error
    │   ├── RunLimitExceededError          more supersteps than ``max_steps``
    │   ├── GraphTimeoutError (TimeoutError)
    │   ├── NodeTimeoutError (TimeoutError)
    │   ├── CircuitOpenError               a node's circuit breaker is open: it failed fast
    │   └── AgentGroupError                sub-agents a node gathered failed (each named)
    ├── StateUpdateError (ValueError)      an input or update does not fit the state schema
    │   └── InvalidUpdateError             writes that cannot be merged (two writers, one field)
    ├── ContextNotProvidedError (LookupError)
    ├── CredentialsError (LookupError)     a node's credentials cannot be given to it
    ├── ModelError (RuntimeError)          a chat model failed, or replied what cannot be used
    ├── OpenAPICallError (RuntimeError)    an OpenAPI tool's request failed, or was refused unsent
    ├── MCPToolError (RuntimeError)        an MCP server's tool failed, timed out or was unreachable
    ├── WorkspaceError (ValueError)        a workspace refused a path, an edit or a write
    ├── ResumeError (ValueError)           a continuation or resume that cannot happen
    ├── UnknownThreadError (LookupError)   a thread or branch that has no history
    ├── StateStoreError (RuntimeError)     a store cannot write or read a record
    │   └── ThreadConflictError            another writer changed the thread first
    │       └── ThreadBusyError            another run holds the thread (its lease)
    └── InternalError (AssertionError)     a bug in nodestep itself

``nodestep`` exports each of them but the MCP ones, which ``nodestep.agents`` exports with
the MCP client. Each message says what went wrong, the name or value involved, and how to
fix it. The
exceptions also carry those facts as attributes, so code can act on them.

Every error survives ``pickle``, ``copy.copy`` and ``copy.deepcopy`` with its type, message
and attributes, so an error raised in a worker process (``ProcessPoolExecutor``) reaches
the parent intact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentGroupError",
    "CircuitOpenError",
    "ConditionError",
    "ContextNotProvidedError",
    "CredentialsError",
    "GraphConfigError",
    "GraphExecutionError",
    "GraphTimeoutError",
    "InternalError",
    "InvalidUpdateError",
    "MCPSchemaError",
    "MCPToolError",
    "ModelError",
    "NodeTimeoutError",
    "NodestepError",
    "OpenAPICallError",
    "ResumeError",
    "RunLimitExceededError",
    "StateStoreError",
    "StateUpdateError",
    "ThreadBusyError",
    "ThreadConflictError",
    "UnknownThreadError",
    "WorkspaceError",
]


class NodestepError(Exception):
    """Base class of every error nodestep raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles (and copies) as ``cls(*args)`` plus ``__dict__``; but most of
        # these classes take other arguments than their message, and InternalError adds a
        # prefix to it. So rebuild without calling ``__init__``: the message as it is,
        # then the attributes.
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[NodestepError], args: tuple[Any, ...]) -> NodestepError:
    """Recreate an error from its class and ``args``, without its ``__init__``."""
    # The builtin that lays out the instance must make it: ``cls.__new__`` would find
    # RuntimeError's before TimeoutError's in the MRO of GraphTimeoutError, and refuse.
    base: Any = cls
    while "__new__" not in vars(base):
        base = base.__base__
    error: NodestepError = base.__new__(cls)
    error.args = args
    return error


class GraphConfigError(NodestepError, ValueError):
    """The graph, a call or a store is set up in a way that cannot work.

    Attributes:
        problems: Each problem found, with its fix; ``flow()`` reports all of them at once.
    """

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


class ConditionError(GraphConfigError):
    """A ``when`` condition that cannot be parsed or does not fit the state it reads.

    Attributes:
        text: The condition as written.
        offset: Where in ``text`` the problem is (0-based).
        file: The manifest file it came from, or ``None`` (a condition written in Python).
        line: The 1-based line of the problem (in ``file``, else in ``text``).
        column: The 1-based column of the problem.
    """

    def __init__(
        self, message: str, *, text: str, offset: int, file: str | None, line: int, column: int
    ) -> None:
        super().__init__(message)
        self.text = text
        self.offset = offset
        self.file = file
        self.line = line
        self.column = column


class GraphExecutionError(NodestepError, RuntimeError):
    """A run failed for a reason that is not an exception raised by node code."""


class RunLimitExceededError(GraphExecutionError):
    """A call needed more supersteps than the graph's ``max_steps``.

    Attributes:
        max_steps: The limit that was reached.
    """

    def __init__(self, message: str, max_steps: int) -> None:
        super().__init__(message)
        self.max_steps = max_steps


class GraphTimeoutError(GraphExecutionError, TimeoutError):
    """A call spent longer inside supersteps than the graph's ``timeout``."""


class NodeTimeoutError(GraphExecutionError, TimeoutError):
    """One run of a node took longer than its ``@node(timeout=...)``.

    ``fix=`` replaces the message's advice, for a limit set elsewhere (an agent's
    manifest).

    Attributes:
        node: The node's name.
        timeout: The limit in seconds.
    """

    def __init__(self, node: str, timeout: float, *, fix: str | None = None) -> None:
        fix = fix or (
            "give it a longer @node(timeout=...) if it needs one, or a retry=RetryPolicy(...) "
            "to try again"
        )
        super().__init__(f"Node '{node}' timed out after {timeout:g}s; {fix}")
        self.node = node
        self.timeout = timeout


class AgentGroupError(GraphExecutionError):
    """Sub-agents that a node gathered failed; the message names every one.

    Attributes:
        failures: The ``AgentResult`` of each failed sub-agent, in spawn order: its name,
            thread id and error.
    """

    def __init__(self, node: str, failures: Sequence[Any] = ()) -> None:
        lines = [
            f"  {f.name}#{f.index} (thread '{f.thread_id}'): {type(f.error).__name__}: {f.error}"
            for f in failures
        ]
        super().__init__(
            f"{len(failures)} sub-agent(s) of node '{node}' failed:\n" + "\n".join(lines) + "\n"
            "Fix them and continue the run with invoke(None, thread_id=...): the sub-agents "
            "that completed are read back, not run again. Or pass return_exceptions=True "
            "to ctx.gather to handle failures in the node."
        )
        self.node = node
        self.failures = list(failures)


class StateUpdateError(NodestepError, ValueError):
    """An input or update does not fit the state schema.

    Attributes:
        field: The field involved, when there is one.
        writer: Who wrote the value: a node name, ``"input"`` or ``"update_state"``.
    """

    def __init__(self, message: str, *, field: str | None = None, writer: str | None = None):
        super().__init__(message)
        self.field = field
        self.writer = writer


class InvalidUpdateError(StateUpdateError):
    """Writes that cannot be merged, such as two writers of a plain field in one superstep.

    Attributes:
        writers: The nodes (or ``"update_state"``) whose writes collided.
        step: The superstep, when the collision happened in one.
    """

    def __init__(
        self, message: str, *, field: str, writers: Sequence[str], step: int | None = None
    ) -> None:
        super().__init__(message, field=field, writer=writers[-1] if writers else None)
        self.writers = tuple(writers)
        self.step = step


class ContextNotProvidedError(NodestepError, LookupError):
    """A node read ``ctx.context`` in a run that was given no ``context=``.

    The message names the node; the fix is ``context=...`` on the call, and again on the call
    that resumes the run, since the context is never stored.
    """


class ModelError(NodestepError, RuntimeError):
    """A chat model failed, or gave a reply that cannot be used (a scripted model's too).

    Attributes:
        model: The model's name, as its ``name`` attribute gives it.
        status: The HTTP status the server answered (e.g. 429), or ``None``.
        retryable: Whether another attempt may succeed (a 429, a 5xx, a lost connection).
    """

    def __init__(
        self, message: str, *, model: str = "", status: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.model = model
        self.status = status
        self.retryable = retryable


class OpenAPICallError(NodestepError, RuntimeError):
    """An OpenAPI tool's request failed: the server answered 4xx or 5xx, did not answer, or
    the request was refused before it was sent (it would have left ``base_url``).

    The message names the tool and what the server answered (never a secret).

    Attributes:
        status: The HTTP status the server answered, or ``None`` when no answer came.
    """

    status: int | None = None  # set by the tool that raises it


class MCPToolError(NodestepError, RuntimeError):
    """A call of an MCP server's tool failed: the tool answered an error (``isError``), the
    server refused the call or broke the protocol, did not answer in time, or is gone.

    The tool node turns it into an error tool message for the model, which names the
    server and the tool.

    Attributes:
        server: The server's name.
        tool: The tool's name, as the server lists it.
        timed_out: Whether the call was given up for taking longer than its timeout.
        status: The HTTP error status a server over HTTP answered the request with;
            ``None`` when there was none (or the server runs as a child process).
    """

    def __init__(
        self,
        message: str,
        *,
        server: str = "",
        tool: str = "",
        timed_out: bool = False,
        status: int | None = None,
    ):
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.timed_out = timed_out
        self.status = status


class MCPSchemaError(GraphConfigError):
    """An MCP tool's input schema can neither be shown to a model nor check arguments.

    Raised when the tools are listed; ``skip_unmappable=True`` leaves such tools out.

    Attributes:
        server: The server's name.
        tool: The tool's name, as the server lists it.
        where: The JSON pointer of the schema part at fault (``""``: the top level).
    """

    def __init__(self, message: str, *, server: str = "", tool: str = "", where: str = ""):
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.where = where


class WorkspaceError(NodestepError, ValueError):
    """A workspace refused a call: a path it does not allow, a file that is not there, an
    edit whose old text is missing or not unique, or a write past a size limit.

    The message names the path and the rule; a tool node sends it to the model, which can
    try again.

    Attributes:
        path: The path as the caller gave it.
        rule: Which rule refused it: ``"path"``, ``"missing"``, ``"edit"``, ``"limit"``,
            ``"type"`` (not text), ``"folder"`` (a file where a folder is, or the other
            way round) or ``"disk"`` (a ``FolderWorkspace``'s disk refused to save it).
    """

    def __init__(self, message: str, *, path: str, rule: str) -> None:
        super().__init__(message)
        self.path = path
        self.rule = rule


class CredentialsError(NodestepError, LookupError):
    """A node asked for credentials it cannot have; the message never holds a secret.

    Attributes:
        node: The node that asked.
        role: The role it asked for.
    """

    def __init__(self, message: str, *, node: str = "", role: str = "") -> None:
        super().__init__(message)
        self.node = node
        self.role = role


class CircuitOpenError(GraphExecutionError):
    """A node's circuit breaker is open, so the node failed fast without running.

    ``fix=`` replaces the message's advice, for a breaker declared elsewhere (an agent's
    manifest).

    Attributes:
        node: The node's name.
        retry_after: Seconds until the breaker lets a trial call through.
    """

    def __init__(self, node: str, retry_after: float, *, fix: str | None = None) -> None:
        fix = fix or (
            "Continue the thread after that with invoke(None, thread_id=...), or reset the "
            "breaker with breaker.reset() once the service is back."
        )
        super().__init__(
            f"Node '{node}' was not run: its circuit breaker is open after repeated "
            f"failures, and lets a trial call through in {max(retry_after, 0.0):.3g}s. {fix}"
        )
        self.node = node
        self.retry_after = retry_after


class ResumeError(NodestepError, ValueError):
    """A call asked to continue or resume a thread in a way that cannot happen.

    Attributes:
        pending: The keys of the interrupts that are waiting for an answer, if any.
    """

    def __init__(self, message: str, pending: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.pending = tuple(pending)


class UnknownThreadError(NodestepError, LookupError):
    """A thread, branch or event that the store has no record of.

    Attributes:
        thread_id: The thread asked for.
        branch_id: The branch asked for.
    """

    def __init__(self, message: str, *, thread_id: str, branch_id: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.branch_id = branch_id


class StateStoreError(NodestepError, RuntimeError):
    """A store cannot write or read a record.

    Attributes:
        path: The file involved, for file stores.
        line: The 1-based line of the record, when a record is at fault.
        offset: The byte offset of that line.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.offset = offset


class ThreadConflictError(StateStoreError):
    """Another writer appended to the thread's branch after this writer read it.

    nodestep uses optimistic concurrency: a writer remembers the last sequence number of the
    branch it read, and the store refuses its append if the branch has moved on. Nothing of
    the refused append is stored; ``stored`` says what the writer had stored before it (a
    run's own earlier records stay: a retry with the same ``request_key`` applies the
    input once).

    Attributes:
        thread_id: The thread.
        branch_id: The branch.
        expected: The last sequence number the writer had seen; -1 when not known.
        found: The last sequence number in the store; -1 when not known.
        stored: What the writer had stored before the refused append, or ``""``.
    """

    def __init__(
        self, thread_id: str, branch_id: str, expected: int, found: int, *, stored: str = ""
    ) -> None:
        tail = stored or (
            "Load the thread again and retry, or give concurrent writers their own threads."
        )
        super().__init__(
            f"Thread '{thread_id}' (branch '{branch_id}') was changed by another writer: "
            f"this append follows event {expected}, but the store now ends at event "
            f"{found}. Nothing of this append was stored. {tail}"
        )
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.stored = stored
        self.expected = expected
        self.found = found


class ThreadBusyError(ThreadConflictError):
    """Another run holds the thread's branch: its lease has not expired.

    A run takes the branch before it writes anything and holds it until it ends (see
    "One writer per thread" in the persistence docs). A second writer is refused before it
    writes, or waits with ``wait_for_thread=``. The same error refuses an append of a run
    whose lease expired and was taken over by another writer (``lost``).

    Attributes:
        holder: Who holds the branch: a run id, or ``"update_state"`` or ``"migrate"``;
            ``""`` when no one holds it any more (``lost`` only).
        expires: When the holder's lease expires, a ``time.time()`` timestamp.
        pid: The holder's process id (0 when the store does not record it).
        host: The holder's host name (``""`` when the store does not record it).
        waited: Seconds the caller waited for the branch (``wait_for_thread=``).
        lost: True when the refused writer had held the branch, and its lease expired.
    """

    def __init__(
        self,
        thread_id: str,
        branch_id: str,
        holder: str,
        expires: float,
        *,
        pid: int = 0,
        host: str = "",
        waited: float = 0.0,
        lost: bool = False,
        stored: str = "",
        fix: str = "",
    ) -> None:
        where = f" (pid {pid} on host '{host}')" if pid else ""
        named = holder if holder in ("update_state", "migrate") else f"run '{holder}'"
        who = f"{named}{where}" if holder else "no one"
        if lost:
            what = (
                f"Thread '{thread_id}' (branch '{branch_id}') is no longer held by this "
                f"writer: its lease expired (its process did not renew it in time), and "
                f"{f'{who} holds the thread now' if holder else 'it was taken over since'}. "
                f"This writer can no longer append to it: nothing more of it is stored. "
            )
            advice = stored or "Retry with the same request_key to continue where it stopped."
        else:
            advice = fix or (
                "Pass wait_for_thread=seconds to wait for the thread, retry later (with the "
                "same request_key, the input is applied once), or give concurrent runs "
                "their own threads."
            )
            left = expires - time.time()
            waiting = f" This call waited {waited:.3g} s for it." if waited else ""
            what = (
                f"Thread '{thread_id}' (branch '{branch_id}') is busy: {who} holds it, "
                f"until {_clock_time(expires)} ({left:.3g} s from now) unless it renews its lease."
                f"{waiting} Nothing was stored. "
            )
        StateStoreError.__init__(self, what + advice)
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.stored = stored
        self.expected = -1  # a busy thread is refused before anything is read or compared
        self.found = -1
        self.holder = holder
        self.expires = expires
        self.pid = pid
        self.host = host
        self.waited = waited
        self.lost = lost
        self._fix = fix

    def again(
        self, *, waited: float | None = None, stored: str | None = None, fix: str | None = None
    ) -> ThreadBusyError:
        """Return this error with its message made again for a later ``waited`` or ``stored``,
        or with the ``fix`` that suits the call it refused (not a run's)."""
        return ThreadBusyError(
            self.thread_id,
            self.branch_id,
            self.holder,
            self.expires,
            pid=self.pid,
            host=self.host,
            waited=self.waited if waited is None else waited,
            lost=self.lost,
            stored=self.stored if stored is None else stored,
            fix=self._fix if fix is None else fix,
        )


def _clock_time(ts: float) -> str:
    """Return ``ts`` as local clock time, for a message; ``"?"`` when it is no time."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return "?"


class InternalError(NodestepError, AssertionError):
    """A bug in nodestep itself; please report it with the message."""

    def __init__(self, message: str) -> None:
        super().__init__(f"nodestep internal error (please report this bug): {message}")
