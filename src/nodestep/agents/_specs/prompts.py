"""What an LLMNode tells its model: the system prompt with its tools, and the tools' specs.

The system prompt of a call is the node's ``system`` prompt in the call's language
(``context["lang"]``, English by default and key by key), followed by one entry per tool:
``<name> - <description>`` and the tool's triggers, or the tool's own
``tool_prompt_template`` with ``{name}``, ``{description}`` and ``{triggers}`` filled in.
It is sent with every call and never stored, so a conversation can change language.
"""

from __future__ import annotations

from typing import Any

from nodestep.agents._messages import SystemMessage
from nodestep.agents._specs.arguments import parameters_schema
from nodestep.agents._specs.bundles import flatten, in_language
from nodestep.agents._specs.kinds import LLMSpec, ToolSpec

__all__ = ["DEFAULT_TEMPLATE", "Prompts"]

DEFAULT_TEMPLATE = "{name} - {description}\n{triggers}"
"""How a tool is listed when it gives no ``tool_prompt_template``."""


class Prompts:
    """The system prompt and tool specs of one LLMNode, made once per language.

    Args:
        llm: The LLMNode.
        tools: Its tools, in the order it lists them.
    """

    def __init__(self, llm: LLMSpec, tools: list[ToolSpec]) -> None:
        self.llm = llm
        self.tools = tools
        self._system: dict[str, str | None] = {}
        self._messages: dict[str, SystemMessage | None] = {}
        self._specs: dict[str, list[dict[str, Any]]] = {}

    def system(self, lang: str) -> str | None:
        """Return the system prompt in ``lang``, or ``None`` when there is none."""
        if lang not in self._system:
            self._system[lang] = self._compose(lang)
        return self._system[lang]

    def message(self, lang: str) -> SystemMessage | None:
        """Return the system prompt in ``lang`` as the message that starts each call.

        Why one per language: a message is frozen, so every call can share it, where a
        message made anew is validated on each model call (two in an agent's turn).
        """
        if lang not in self._messages:
            text = self.system(lang)
            self._messages[lang] = None if text is None else SystemMessage(content=text)
        return self._messages[lang]

    def _compose(self, lang: str) -> str | None:
        prompts = in_language(self.llm.prompts, lang)
        text = prompts.get("system") if isinstance(prompts, dict) else prompts
        system = flatten(text) if text is not None else None
        # Blank parts are left out, so a prompt of tools only starts with its first tool.
        parts = [system, *(tool_entry(tool, lang) for tool in self.tools)]
        joined = "\n".join(p for p in parts if p is not None and p.strip())
        return joined or None

    def specs(self, lang: str) -> list[dict[str, Any]]:
        """Return the tools as the model is told of them, descriptions in ``lang``."""
        if lang not in self._specs:
            self._specs[lang] = [tool_spec(tool, lang) for tool in self.tools]
        return self._specs[lang]


def tool_entry(tool: ToolSpec, lang: str) -> str:
    """Return how ``tool`` is listed in a system prompt in ``lang``."""
    template = in_language(tool.template, lang) if tool.template else None
    text = template if isinstance(template, str) else DEFAULT_TEMPLATE
    triggers = "\n".join(f"- {t}" for t in triggers_in(tool, lang) if t.strip())
    values = {
        "{name}": tool.name,
        "{description}": flatten(in_language(tool.description, lang)).strip(),
        "{triggers}": triggers,
    }
    # Each placeholder is replaced once, by hand: str.format would choke on a brace in a
    # description, and would let a template reach attributes ({name.__class__}).
    out = []
    rest = text
    while rest:
        index, found = min(
            ((rest.find(k), k) for k in values if rest.find(k) >= 0), default=(-1, "")
        )
        if index < 0:
            out.append(rest)
            break
        out.append(rest[:index] + values[found])
        rest = rest[index + len(found) :]
    return "".join(out).strip()


def triggers_in(tool: ToolSpec, lang: str) -> list[str]:
    """Return the tool's example requests in ``lang`` (each falling back to English)."""
    out: list[str] = []
    for bundle in tool.triggers:
        value = in_language(bundle, lang)
        items = value if isinstance(value, list) else [value]
        out += [flatten(item) for item in items if item is not None]
    return out


def tool_spec(tool: ToolSpec, lang: str) -> dict[str, Any]:
    """Return ``tool`` as a model is told of it: name, description and parameters."""
    if tool.tool is not None:
        return {**tool.tool.spec, "name": tool.name}
    return {
        "name": tool.name,
        "description": flatten(in_language(tool.description, lang)).strip(),
        "parameters": parameters_schema(tool.arguments, lang),
    }
