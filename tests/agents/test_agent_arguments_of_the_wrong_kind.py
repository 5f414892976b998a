"""Agent builders refuse arguments of the wrong kind with an error naming the value and fix.

One tool (or a tool's name, or ``None``) where a list of tools belongs, and a system prompt
that is not text, are common slips: each is a ``GraphConfigError`` at build time, never
Python's own ``TypeError`` or a pydantic ``ValidationError`` from deep inside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from nodestep import GraphConfigError, ScriptedModel, create_react_agent, model_node, tool
from nodestep.agents import tool_node


@tool
def search(query: str) -> str:
    """Search the manual."""
    return "found"


BUILDERS: list[tuple[str, Callable[[Any], object]]] = [
    ("create_react_agent", lambda tools: create_react_agent(ScriptedModel(["x"]), tools)),
    ("tool_node", lambda tools: tool_node(tools)),
    ("tools", lambda tools: model_node(ScriptedModel(["x"]), tools=tools)),
]


@pytest.mark.parametrize(("where", "build"), BUILDERS)
def test_one_tool_where_a_list_belongs_is_refused_naming_the_fix(
    where: str, build: Callable[[Any], object]
) -> None:
    with pytest.raises(GraphConfigError) as caught:
        build(search)
    assert str(caught.value) == (
        f"{where} takes a list of tools, got the one tool 'search'; pass a list, e.g. "
        f"[search], or [] for none."
    )
    for wrong in ("search", None, 3):
        with pytest.raises(GraphConfigError, match=f"{where} takes a list of tools, got "):
            build(wrong)
    build([search])


class Ticket(BaseModel):
    title: str


@pytest.mark.parametrize("system", [3, ["Be brief."], b"Be brief."])
def test_a_system_prompt_that_is_not_text_is_refused(system: Any) -> None:
    message = (
        f"system= takes the system prompt as a str, or None for none; got {type(system).__name__}"
    )
    with pytest.raises(GraphConfigError, match=message):
        create_react_agent(ScriptedModel(["x"]), [], system=system)
    with pytest.raises(GraphConfigError, match=message):
        # With a response format the prompt is joined to the schema's instruction: it must
        # be refused there too, not turned into text.
        create_react_agent(ScriptedModel(["x"]), [], system=system, response_format=Ticket)
    with pytest.raises(GraphConfigError, match=message):
        model_node(ScriptedModel(["x"]), system=system)
