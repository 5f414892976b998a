"""The settings of ``Graph(...)``: each checked, with the fix in its refusal.

``check_name`` and ``check_settings`` refuse a value that cannot work; ``agent_graphs``
turns ``agents=`` into the compiled graphs the engine spawns, by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.lease import DEFAULT_TTL
from nodestep._engine.subagents import agent_graph
from nodestep._errors import GraphConfigError
from nodestep._numbers import is_finite_number, shown_number
from nodestep.store import StateStore

__all__ = ["agent_graphs", "check_name", "check_settings"]


def check_name(name: Any) -> None:
    """Refuse a graph name that is not a non-blank string.

    Raises:
        GraphConfigError: naming the value and the fix.
    """
    # The name shows in errors, events and drawings, where a blank one reads as nothing.
    if not isinstance(name, str) or not name.strip():
        raise GraphConfigError(
            f"A graph's name must be a non-blank string, got {name!r}. Name it after what it "
            f"does, e.g. Graph(State, name='support_bot'), or leave out name= for 'graph'."
        )


def check_settings(
    *,
    max_steps: Any,
    timeout: Any,
    state_store: Any,
    id_factory: Any,
    clock: Any,
    sleep: Any,
    lease_ttl: Any,
    cache_store: Any,
    redact: Any,
) -> None:
    """Refuse ``Graph(...)`` settings that cannot work.

    Raises:
        GraphConfigError: naming the setting, the value and what it takes.
    """
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise GraphConfigError(f"max_steps must be a positive int, got {max_steps!r}.")
    if timeout is not None and not (is_finite_number(timeout) and timeout > 0):
        raise GraphConfigError(
            f"timeout must be a positive number of seconds, got {shown_number(timeout)}."
        )
    if state_store is not None and not isinstance(state_store, StateStore):
        raise GraphConfigError(
            f"state_store must be a StateStore, got {type(state_store).__name__}."
        )
    for what, value in (("id_factory", id_factory), ("clock", clock)):
        if value is not None and not callable(value):
            raise GraphConfigError(
                f"{what} must be a function taking no arguments, got {type(value).__name__}."
            )
    if sleep is not None and not callable(sleep):
        raise GraphConfigError(
            f"sleep must be an async function that takes the seconds to wait, like "
            f"anyio.sleep; got {type(sleep).__name__}."
        )
    if not (is_finite_number(lease_ttl) and lease_ttl > 0):
        raise GraphConfigError(
            f"lease_ttl must be a positive number of seconds, got {shown_number(lease_ttl)}; the "
            f"default, {DEFAULT_TTL:g}, suits most runs."
        )
    if cache_store is not None and not isinstance(cache_store, StateStore):
        raise GraphConfigError(
            f"cache_store must be a StateStore, got {type(cache_store).__name__}; leave it "
            f"out to keep cached node results in memory."
        )
    if redact is not None and not callable(redact):
        raise GraphConfigError(
            f"redact must be a function that takes the message and returns the message "
            f"to store, got {type(redact).__name__}."
        )


def agent_graphs(name: str, agents: Any) -> dict[str, CompiledGraph]:
    """Return the compiled graphs of ``Graph(..., agents=...)``, by the name nodes spawn.

    Raises:
        GraphConfigError: something that is not an agent, or two agents with one name.
    """
    where = f"Graph '{name}' got agents= with"
    if isinstance(agents, Mapping):
        pairs = [(str(k), agent_graph(v, where)) for k, v in agents.items()]
    else:
        pairs = [(g.name, g) for g in (agent_graph(a, where) for a in agents)]
    out: dict[str, CompiledGraph] = {}
    for key, compiled in pairs:
        if key in out:
            raise GraphConfigError(
                f"Graph '{name}' got two sub-agents named '{key}' in agents=; give each "
                f"its own name, e.g. agents={{'{key}': a, '{key}_2': b}}."
            )
        out[key] = compiled
    return out
