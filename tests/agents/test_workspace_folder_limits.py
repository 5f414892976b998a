"""FolderWorkspace and max_file_bytes: a file on disk past the limit is never read whole.

The files are sparse (made by ``truncate``), so a large one costs no disk and no time; the
peak of memory that Python allocates while a call runs shows whether the file was read.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nodestep import WorkspaceError
from nodestep.agents import (
    FolderWorkspace,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    workspace_tools,
)

pytestmark = pytest.mark.anyio

_BIG = 64 * 2**20  # bytes of the sparse file: reading it whole would allocate twice that
_READ_NOTHING = 2**20  # a call that reads none of it allocates far less than this


def _sparse(root: Path, name: str, size: int = _BIG) -> Path:
    path = root / name
    with path.open("wb") as file:
        file.truncate(size)
    return path


def _peak(work: Callable[[], Any]) -> tuple[Any, int]:
    """Return what ``work`` returned (or the error it raised) and the bytes it allocated
    at the most."""
    tracemalloc.start()
    try:
        result: Any = work()
    except WorkspaceError as error:
        result = error
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, peak


def test_a_file_past_max_file_bytes_is_refused_without_being_read(tmp_path: Path) -> None:
    _sparse(tmp_path, "big.log")
    space = FolderWorkspace(tmp_path, max_file_bytes=1000)
    for operation in (lambda: space.read("big.log"), lambda: space.edit("big.log", "a", "b")):
        error, peak = _peak(operation)
        assert isinstance(error, WorkspaceError) and peak < _READ_NOTHING
        assert (error.path, error.rule) == ("big.log", "limit")
        assert str(error) == (
            "Cannot read 'big.log': the file holds 67,108,864 bytes, more than a file of the "
            "workspace may hold (max_file_bytes=1,000). Split the file on disk into smaller "
            "ones, or give the FolderWorkspace a larger max_file_bytes; it can still be "
            "written over or deleted."
        )


def test_a_file_at_max_file_bytes_is_read(tmp_path: Path) -> None:
    (tmp_path / "full.txt").write_text("x" * 1000)
    assert FolderWorkspace(tmp_path, max_file_bytes=1000).read("full.txt") == "x" * 1000


def test_a_file_past_the_limit_is_found_replaced_and_deleted_without_being_read(
    tmp_path: Path,
) -> None:
    big = _sparse(tmp_path, "big.log")
    space = FolderWorkspace(tmp_path, max_file_bytes=1000, max_total_bytes=2 * _BIG)
    found, peak = _peak(lambda: (space.exists("big.log"), space.list(), space.glob("*.log")))
    assert found == (True, ["big.log"], ["big.log"]) and peak < _READ_NOTHING
    _, peak = _peak(lambda: space.write("big.log", "short now"))
    assert peak < _READ_NOTHING and big.read_text() == "short now"
    _sparse(tmp_path, "big.log")
    _, peak = _peak(lambda: space.delete("big.log"))
    assert peak < _READ_NOTHING and not big.exists()


def test_a_file_that_grows_past_the_limit_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sparse(tmp_path, "growing.log")
    real_fstat = os.fstat

    def small_at_first(handle: int) -> os.stat_result:
        # The size the file had when it was opened; it has grown since.
        found = list(real_fstat(handle))
        found[6] = 10  # st_size
        return os.stat_result(found)

    monkeypatch.setattr(os, "fstat", small_at_first)
    space = FolderWorkspace(tmp_path, max_file_bytes=1000)
    error, peak = _peak(lambda: space.read("growing.log"))
    assert isinstance(error, WorkspaceError) and peak < _READ_NOTHING
    assert str(error).startswith(
        "Cannot read 'growing.log': the file holds more than a file of the workspace may "
        "hold (max_file_bytes=1,000)."
    )


async def test_a_tool_call_reading_a_file_past_the_limit_gets_an_error_naming_it(
    tmp_path: Path,
) -> None:
    _sparse(tmp_path, "dump.bin", 5000)
    agent = create_react_agent(
        ScriptedModel([ScriptedReply(tool_calls=[("read_file", {"path": "dump.bin"})]), "Ok."]),
        workspace_tools(),
        state=MessagesState,
        workspace=FolderWorkspace(tmp_path, max_file_bytes=1000),
    )
    result = await agent.ainvoke({"messages": "Read the dump."})
    message = result.state.messages[2]
    assert message.status == "error"
    assert message.content.startswith(
        "Error: Cannot read 'dump.bin': the file holds 5,000 bytes, more than a file of the "
        "workspace may hold (max_file_bytes=1,000)."
    )
