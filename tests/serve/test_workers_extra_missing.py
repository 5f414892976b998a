"""``create_app(workers=...)`` without the workers extra: one error naming it, at once.

Without the check the queue would first be opened when the server starts, where the
missing module is a traceback in uvicorn's log and a server that does not start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serve_graphs import GRAPHS

from nodestep import GraphConfigError
from nodestep.serve import create_app


def test_workers_without_procrastinate_name_the_workers_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes the import fail as it does where the extra is missing.
    monkeypatch.setitem(sys.modules, "procrastinate", None)
    paths = {name: f"serve_graphs:{name}" for name in GRAPHS}
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[workers\]'"):
        create_app(
            GRAPHS,
            store=f"sqlite:///{tmp_path / 'runs.db'}",
            workers="postgresql://app@db.example/queue",
            graph_paths=paths,
        )
