"""The tool node's part of a workspace: a view of the files for each call, and the calls'
changes as one write of the state's workspace field.

Each call gets its own view of the files as the reply found them, so calls that run
concurrently never see each other half-way, and what they wrote is merged in the order of
the calls (a later call's write of a path wins), never in the order they finished: the
same reply gives the same files. A call that failed changes nothing, nor does one whose
changes clash with an earlier call's. A recorded replay, which runs no tool, takes the
files from the record. A ``FolderWorkspace`` keeps the same promises: its views hold the
calls' changes, and the changes kept are saved to the folder, call by call, in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from nodestep._errors import GraphConfigError, InternalError, WorkspaceError
from nodestep._flow.nodes import Node
from nodestep._flow.recorded import recording
from nodestep.agents._tools import Tool
from nodestep.agents._workspace.files import merge_files
from nodestep.agents._workspace.folder import FolderWorkspace
from nodestep.agents._workspace.handle import Workspace

__all__ = [
    "call_workspaces",
    "checks_workspace",
    "tool_workspace",
    "workspace_problem",
    "workspace_writes",
]


def tool_workspace(tools: Iterable[Tool], workspace: object) -> Workspace | None:
    """Return the workspace settings a tool node uses, or ``None`` when no tool needs one.

    Args:
        tools: The node's tools.
        workspace: What the caller gave as ``workspace=`` (``None``: the defaults).

    Raises:
        GraphConfigError: ``workspace`` is not a ``Workspace``.
    """
    if workspace is not None and not isinstance(workspace, Workspace):
        raise GraphConfigError(
            f"workspace= takes a Workspace (the settings of a workspace kept in the state) "
            f"or a FolderWorkspace, got {type(workspace).__name__}: {workspace!r}."
        )
    if not any(item.workspace_param is not None for item in tools):
        return None
    return Workspace() if workspace is None else workspace


def call_workspaces(space: Workspace | None, state: Any, count: int) -> list[Workspace | None]:
    """Return a view of the files for each of ``count`` calls (``None`` without a workspace)."""
    if space is None:
        return [None] * count
    files = getattr(state, space.field) if space.field is not None else None
    return [space.bind(files) for _ in range(count)]


def workspace_writes(
    space: Workspace | None, state: Any, views: Sequence[Workspace | None], results: list[Any]
) -> dict[str, Any]:
    """Return the update of the workspace field that the calls' views make, if any.

    The changes of the calls that worked merge in call order. Each call checked its own
    changes against the files the reply found; a call whose changes no longer fit once
    an earlier call's are made (a file where that call made a folder, or a workspace past
    its size limit) is refused after the fact: its changes are dropped, and its tool
    message in ``results`` becomes an error that says so.

    With a ``FolderWorkspace`` the kept changes are saved to the folder instead, call by
    call in call order, and the update is empty; a call whose changes the disk refuses
    gets an error message that says so (see ``FolderWorkspace.apply``).

    Args:
        space: The node's workspace settings.
        state: The state the calls ran on.
        views: Each call's view, in the order of the calls.
        results: Each call's tool message, in the order of the calls.
    """
    if space is None:
        return {}
    if isinstance(space, FolderWorkspace):
        for index, changes in _kept(space, None, views, results):
            try:
                space.apply(changes)
            except WorkspaceError as problem:
                update = {"content": f"Error: {problem}", "status": "error"}
                results[index] = results[index].model_copy(update=update)
        return {}
    if space.field is None:
        return {}
    replayed = recording()
    ids = [message.tool_call_id for message in results]
    if replayed is not None and ids and all(replayed.tool_result(i) for i in ids):
        # A recorded replay gave every call its stored result without running the tools:
        # the files they changed come from the record too.
        stored = replayed.tool_update(ids[0]).get(space.field)
        return {space.field: stored} if stored else {}
    merged: dict[str, str | None] = {}
    for _, changes in _kept(space, getattr(state, space.field), views, results):
        merged.update(changes)
    return {space.field: merged} if merged else {}


def _kept(
    space: Workspace, files: Any, views: Sequence[Workspace | None], results: list[Any]
) -> list[tuple[int, dict[str, str | None]]]:
    """Return the index and the changes of each call whose changes are kept, in call order.

    A call whose changes clash with the earlier calls' gets an error message in
    ``results`` instead (see ``workspace_writes``).
    """
    kept: list[tuple[int, dict[str, str | None]]] = []
    # The files with the kept changes made, built when a second call needs it and kept
    # up as calls are kept: each change is made once, not once per later call.
    trial: Workspace | None = None
    for index, view in enumerate(views):
        message = results[index]
        if view is None or message.status == "error" or not view.changes:
            continue
        changes = view.changes
        problem = None
        if kept and trial is None:
            trial = space.bind(files)
            problem = _make(space, trial, [done for _, done in kept], kept=True)
        if trial is not None:
            problem = problem or _make(space, trial, [changes])
        if problem is None:
            kept.append((index, changes))
            continue
        trial = None  # it holds part of the refused changes: built again when needed
        text = (
            f"Error: {problem} An earlier call of the same reply changed the workspace "
            f"first, so this call changed nothing: look again, then call it again."
        )
        results[index] = message.model_copy(update={"content": text, "status": "error"})
    return kept


def _make(
    space: Workspace, trial: Workspace, changes: list[dict[str, str | None]], kept: bool = False
) -> WorkspaceError | None:
    """Make ``changes`` in ``trial``; return why one does not fit, or ``None``."""
    try:
        for change in changes:
            for path, text in change.items():
                if text is None:
                    trial.delete(path)
                else:
                    trial.write(path, text)
    except WorkspaceError as error:
        # Kept changes fit the files they were checked on; a folder's may have been
        # changed meanwhile by another hand, which refuses the later call.
        if kept and space.field is not None:
            raise InternalError(f"kept workspace changes do not replay: {error}") from error
        return error
    return None


def workspace_problem(state: type[BaseModel], field: str, node_name: str) -> str | None:
    """Return why ``state`` cannot hold the workspace of node ``node_name``, or ``None``.

    The tools' changes are written to ``field`` as the files they changed, which only
    ``merge_files`` merges into the others: with another reducer (or none) a write would
    replace the whole workspace. So the check runs when the flow is declared.
    """
    found = state.model_fields.get(field)
    fix = (
        f"Declare {field}: WorkspaceFiles = Field(default_factory=FileMap), subclass "
        f"WorkspaceState, or give the tool node workspace=FolderWorkspace(...) to keep the "
        f"files in a folder"
    )
    if found is None:
        return (
            f"Node '{node_name}' has tools that use the workspace, kept in the state's "
            f"'{field}' field, but {state.__name__} has none. {fix}."
        )
    if not any(item is merge_files for item in found.metadata):
        return (
            f"Node '{node_name}' writes the files its tools change to the field '{field}' "
            f"of {state.__name__}, which has no merge_files reducer, so each write would "
            f"replace the whole workspace. {fix}."
        )
    return None


def checks_workspace(made: Node, space: Workspace | None) -> Node:
    """Return the tool node ``made`` with ``workspace_problem`` added to its state check,
    when its workspace is kept in the state."""
    if space is None or space.field is None:
        return made
    field, earlier = space.field, made.state_check

    def check(state: type[BaseModel]) -> str | None:
        found = earlier(state) if earlier is not None else None
        return found or workspace_problem(state, field, made.name)

    made.state_check = check
    return made
