"""Model and tool nodes in YAML manifests: the ``llm`` and ``tool`` node types.

``load_graph`` knows only the node types of its own; ``agent_node_types`` hands it these
two, made with ``model_node`` and ``tool_node``. The models are given by name
(``models={"main": model}``), never built from manifest text; the tools by name
(``tools=[search]``) or by import path under the manifest's ``allowed_packages``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nodestep._declarative.format import is_import_path
from nodestep._declarative.node_types import NodeDeclaration, NodeType
from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import Node
from nodestep.agents._model_node import conversation_problem, model_node
from nodestep.agents._models import ChatModel
from nodestep.agents._react import has_tool_calls
from nodestep.agents._tool_node import tool_node
from nodestep.agents._tools import Tool, tools_by_name

__all__ = ["agent_node_types"]

_LLM_KEYS = ("model", "system", "tools", "stream", "conversation")
_TOOL_KEYS = ("tools", "handle_errors")
_TOOLS = {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}
_SCHEMA: dict[str, Any] = {
    "model": {"type": "string", "minLength": 1},
    "system": {"type": "string"},
    "tools": _TOOLS,
    "stream": {"type": "boolean"},
    "conversation": {"enum": ["state", "private"]},
    "handle_errors": {"type": "boolean"},
}


def agent_node_types(
    *, models: Mapping[str, ChatModel] | None = None, tools: Sequence[Tool] = ()
) -> dict[str, NodeType]:
    """Return the ``llm`` and ``tool`` node types, for ``load_graph(node_types=...)``.

    A manifest node ``type: llm`` is a ``model_node``: ``model`` (a name in ``models``),
    and optionally ``system`` (the system prompt), ``tools`` (the tools the model is told
    of), ``stream`` and ``conversation`` (``state`` or ``private``). A node ``type: tool``
    is a ``tool_node`` running ``tools``, with ``handle_errors`` (``true`` or ``false``).
    A tool is named by its name in ``tools=`` or by the import path of a ``@tool``
    function (or a plain one, made a tool). Both read and write the state's ``messages``
    field (a ``Messages`` field). The types bring the condition function
    ``has_tool_calls``, so an edge can say ``when: has_tool_calls``.

    Args:
        models: The chat models, by the name a manifest gives as ``model:``.
        tools: The tools a manifest may name by their names.

    Returns:
        ``{"llm": ..., "tool": ...}``.

    Raises:
        GraphConfigError: a model is not a chat model, a tool is not a ``Tool``, or two
            tools share a name.
    """
    not_a_tool = "agent_node_types(tools=...) takes @tool functions, got {item!r}; use @tool."
    reader = _Reader(_models(models), tools_by_name(tools, not_a_tool))
    condition_functions = {"has_tool_calls": has_tool_calls}
    return {
        "llm": NodeType(
            reader.llm,
            keys=_LLM_KEYS,
            required=("model",),
            functions=condition_functions,
            summary="a model node: model: <a name in models=>",
            schema=_SCHEMA,
        ),
        "tool": NodeType(
            reader.tool,
            keys=_TOOL_KEYS,
            required=("tools",),
            functions=condition_functions,
            summary="a tool node: tools: [<tool names or import paths>]",
            schema=_SCHEMA,
        ),
    }


def _models(models: Mapping[str, ChatModel] | None) -> dict[str, ChatModel]:
    chosen = dict(models or {})
    for name, model in chosen.items():
        if not isinstance(name, str) or not isinstance(model, ChatModel):
            raise GraphConfigError(
                f"agent_node_types(models=...) maps names to chat models, e.g. "
                f"{{'main': ScriptedModel([...])}}; got {name!r}: {type(model).__name__}."
            )
    return chosen


class _Reader:
    """Build the nodes of the two types from their declarations."""

    def __init__(self, models: dict[str, ChatModel], tools: dict[str, Tool]) -> None:
        self.models = models
        self.tools = tools

    def llm(self, declared: NodeDeclaration) -> Node | None:
        self._state(declared)
        name = declared.value("model")
        model = self.models.get(name) if isinstance(name, str) else None
        if model is None:
            known = ", ".join(sorted(self.models)) or "none given"
            declared.problem(
                f"node '{declared.name}' names the model {name!r}, which is not among the "
                f"models ({known}); pass it as agent_node_types(models={{{name!r}: model}})",
                "model",
            )
        system = declared.value("system")
        if system is not None and not isinstance(system, str):
            declared.problem(f"'system' takes the system prompt text, got {system!r}", "system")
        stream = self._flag(declared, "stream")
        conversation = declared.value("conversation", "state")
        if conversation not in ("state", "private"):
            declared.problem(
                f"'conversation' takes state (the shared messages) or private (the node's "
                f"own memory of them), got {conversation!r}",
                "conversation",
            )
        tools = self._tools(declared) if declared.has("tools") else []
        if declared.failed or model is None:
            return None
        return self._made(
            declared,
            lambda: model_node(
                model,
                tools=tools,
                system=system,
                name=declared.name,
                stream=stream,
                conversation=conversation,
            ),
        )

    def tool(self, declared: NodeDeclaration) -> Node | None:
        self._state(declared)
        tools = self._tools(declared)
        handle = self._flag(declared, "handle_errors")
        if not tools and not declared.failed:
            declared.problem("'tools' takes a non-empty list of tool names", "tools")
        if declared.failed:
            return None
        return self._made(
            declared, lambda: tool_node(tools, name=declared.name, handle_errors=handle)
        )

    def _state(self, declared: NodeDeclaration) -> None:
        """Report a state the node cannot keep its conversation in, whatever else is wrong."""
        if declared.state is not None:
            problem = conversation_problem(declared.state, declared.name)
            if problem:
                declared.problem(problem, "type")

    def _flag(self, declared: NodeDeclaration, key: str) -> bool:
        value = declared.value(key, True)
        if isinstance(value, bool):
            return value
        declared.problem(f"'{key}' takes true or false, got {value!r}", key)
        return True

    def _tools(self, declared: NodeDeclaration) -> list[Tool]:
        names = declared.value("tools")
        if not isinstance(names, list):
            declared.problem(
                f"'tools' takes a list of tool names or import paths, e.g. [search, "
                f"app.tools:lookup], got {names!r}",
                "tools",
            )
            return []
        found: list[Tool] = []
        for index, text in enumerate(names):
            item = self._tool(declared, text, index)
            if item is not None:
                found.append(item)
        return found

    def _tool(self, declared: NodeDeclaration, text: Any, index: int) -> Tool | None:
        if isinstance(text, str) and text in self.tools:
            return self.tools[text]
        if is_import_path(text):
            what = f"tool {index + 1} of node '{declared.name}'"
            found = declared.resolve("tools", what, index, accept=(Tool,))
            if found is None or isinstance(found, Tool):
                return found
            if callable(found) and not isinstance(found, type):
                return self._as_tool(declared, found, index)
            declared.problem(f"{what} '{text}' is a class, not a tool; name a function", "tools")
            return None
        known = ", ".join(sorted(self.tools)) or "none given"
        declared.problem(
            f"unknown tool {text!r} in node '{declared.name}' (tools: {known}); pass it "
            f"as agent_node_types(tools=[...]), or name it by import path, e.g. "
            f"app.tools:{text if isinstance(text, str) and text.isidentifier() else 'name'}",
            "tools",
            index,
        )
        return None

    def _as_tool(self, declared: NodeDeclaration, fn: Any, index: int) -> Tool | None:
        try:
            return Tool(fn)
        except (TypeError, GraphConfigError) as error:
            declared.problem(f"cannot make a tool of it: {error}", "tools", index)
            return None

    def _made(self, declared: NodeDeclaration, make: Callable[[], Node]) -> Node | None:
        try:
            return make()
        except GraphConfigError as error:  # e.g. two tools of one name
            declared.problem(f"node '{declared.name}' cannot be made: {error}")
            return None
