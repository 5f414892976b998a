"""The ``Graph`` an agent runs: one node per spec reachable from the start node.

An LLMNode sends tool calls to its ToolNodes and the tools answer it, or route on; every
node chooses its next node itself (see ``steps``), so the graph declares each node's
possible targets as its ``goto``, and its edges in the flow end the run. A node takes its
failures' ``$is_error`` edges itself too, reading the call's context: a node's breaker
and timeout guard its work instead of its graph node (see ``guards``), so the node sees
those failures as well. Its ``retry`` stays the engine's: the node hands a failure back
while attempts remain.
"""

from __future__ import annotations

from typing import Any

from nodestep._flow.edges import END, START
from nodestep._flow.nodes import Node, node
from nodestep._graph.graph import Graph
from nodestep.agents._models import ChatModel
from nodestep.agents._specs.arguments import args_model
from nodestep.agents._specs.calling import Caller
from nodestep.agents._specs.guards import Guard
from nodestep.agents._specs.kinds import LLMSpec, NodeSpec, ToolSpec
from nodestep.agents._specs.manifests import Specs
from nodestep.agents._specs.masking import masking
from nodestep.agents._specs.prompts import Prompts
from nodestep.agents._specs.records import conversation_fields, state_class
from nodestep.agents._specs.steps import Plan, call_context, function_step, llm_step, tool_step

__all__ = ["build_graph", "reachable"]

_GUARDS = frozenset({"breaker", "timeout"})
"""The settings of a node that guard its work, not its graph node (see ``guards``)."""


def reachable(specs: Specs, start: str) -> list[str]:
    """Return the nodes the flow can reach from ``start``, in the order found."""
    seen = [start]
    for name in seen:
        spec = specs.nodes[name]
        nexts = [r.target for r in specs.routes.get(name, [])]
        if isinstance(spec, LLMSpec):
            nexts = [y.value for y in spec.tools] + nexts
        seen += [n for n in dict.fromkeys(nexts) if n not in seen]  # two edges, one target
    return seen


def build_graph(
    specs: Specs, start: str, model: ChatModel, **options: Any
) -> tuple[Graph[Any], Plan]:
    """Return the agent's graph, and the plan its node functions share.

    Args:
        specs: The checked specs.
        start: The start node's name.
        model: The chat model.
        **options: Passed to ``Graph`` (``state_store``, ``max_steps``, ``redact``, ...).
    """
    llms = sorted(n for n, s in specs.nodes.items() if isinstance(s, LLMSpec))
    fields = conversation_fields(llms)
    plan = Plan(specs, model, fields)
    names = reachable(specs, start)
    tool_callers = _callers(specs, names)
    for name in names:
        spec = specs.nodes[name]
        if isinstance(spec, LLMSpec):
            tools = [specs.nodes[y.value] for y in spec.tools]
            plan.prompts[name] = Prompts(spec, [t for t in tools if isinstance(t, ToolSpec)])
        elif isinstance(spec, ToolSpec) and spec.tool is None:
            plan.checkers[name] = args_model(name, spec.arguments)
        if _GUARDS & spec.options.keys():
            options_of = spec.options.get
            plan.guards[name] = Guard(name, options_of("breaker"), options_of("timeout"))
        func = getattr(spec, "func", None)
        if func is not None:
            plan.callers[name] = Caller(func, name, specs.account(spec))
    for name in names:
        plan.nodes[name] = _node(plan, specs.nodes[name], tool_callers.get(name, []))
    graph: Graph[Any] = Graph(state_class(fields, fields.get(start)), **options)
    edges = [START >> plan.nodes[start]]
    edges += [plan.nodes[name] >> END for name in names]
    return graph.flow(*edges), plan


def _callers(specs: Specs, names: list[str]) -> dict[str, list[str]]:
    """Return, for each tool, the LLMNodes that list it."""
    out: dict[str, list[str]] = {}
    for name in names:
        spec = specs.nodes[name]
        if isinstance(spec, LLMSpec):
            for y in spec.tools:
                out.setdefault(y.value, []).append(name)
    return out


def _node(plan: Plan, spec: NodeSpec, callers: list[str]) -> Node:
    targets = [r.target for r in plan.specs.routes.get(spec.name, [])]
    if isinstance(spec, LLMSpec):
        fn = llm_step(plan, spec)
        goto = [y.value for y in spec.tools] + [spec.name] + targets
    elif isinstance(spec, ToolSpec):
        fn = tool_step(plan, spec)
        goto = callers + targets
    else:
        fn = function_step(plan, spec)
        goto = targets
    account = plan.specs.account(spec)
    roles = set(account.providers if account is not None else ())
    if isinstance(spec, ToolSpec) and spec.tool is not None:
        roles |= set(spec.tool.roles)
    unique = list(dict.fromkeys(goto)) or None
    fn = masking(fn, call_context)  # its context stays out of the store, run by a step or not
    options = {k: v for k, v in spec.options.items() if k not in _GUARDS}  # see guards
    return node(fn, name=spec.name, goto=unique, roles=sorted(roles), **options)
