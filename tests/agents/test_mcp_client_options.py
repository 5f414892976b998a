"""``MCPClient`` refuses an ``env``, ``headers`` or ``name`` that is not text when it is made.

The SDK would otherwise refuse them later in its own words (a pydantic error, a failed
connection), or never. An env or a header often holds a secret: the message names the key
and the type found, never the value.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_process import tools_command

from nodestep import GraphConfigError
from nodestep.agents import MCPClient


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"env": {"API_KEY": 123}}, "env= holds the key 'API_KEY' with a value of type int"),
        ({"env": ["API_KEY=s3cret"]}, "env= is a list"),
        ({"headers": {"Authorization": b"Bearer s3cret"}}, "value of type bytes"),
        ({"headers": {1: "s3cret"}}, "headers= holds a key of type int"),
    ],
)
def test_env_and_headers_that_are_not_text_are_refused_without_their_values(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(GraphConfigError) as caught:
        MCPClient(command=tools_command(), **options)
    assert message in str(caught.value)
    assert "pass a dict of strings to strings" in str(caught.value)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("name", [3, "", "  "])
def test_a_client_name_that_is_not_text_is_refused(name: Any) -> None:
    with pytest.raises(GraphConfigError, match=f"MCPClient got name={name!r}; pass"):
        MCPClient(command=tools_command(), name=name)
