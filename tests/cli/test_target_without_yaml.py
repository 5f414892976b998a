"""A folder of agent specs without PyYAML: the error names the extra, not a missing LLMNode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nodestep import GraphConfigError
from nodestep.cli import load_target

SPEC = """\
kind: LLMNode
name: chat
prompts:
  system:
    en: You help.
"""


def test_a_specs_folder_without_pyyaml_names_the_yaml_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "chat.yaml").write_text(SPEC)
    # None in sys.modules makes `import yaml` fail as it does where the extra is missing.
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(GraphConfigError) as caught:
        load_target(str(tmp_path / "specs"))
    assert "pip install 'nodestep[yaml]'" in str(caught.value)
    assert "LLMNode" not in str(caught.value)
