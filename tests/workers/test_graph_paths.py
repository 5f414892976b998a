"""What a queued run's graph path may name: a Graph, or an Agent (whose graph runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import GraphConfigError
from nodestep.workers._jobs import import_graph


def test_a_path_may_name_an_agent_and_its_graph_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "chat.yaml").write_text("kind: LLMNode\nname: chat\n")
    (tmp_path / "paths_agent.py").write_text(
        "from pathlib import Path\n"
        "from nodestep import Agent, ScriptedModel\n"
        "agent = Agent(Path(__file__).with_name('specs'), 'chat', llm=ScriptedModel([]))\n"
        "number = 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import paths_agent

    assert import_graph("paths_agent:agent") is paths_agent.agent.graph
    with pytest.raises(GraphConfigError, match=r"names int, not a nodestep Graph.*or an Agent"):
        import_graph("paths_agent:number")
