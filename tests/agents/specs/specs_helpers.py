"""Spec folders for the Agent tests: written from dedented YAML into a temporary folder."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

CHAT = """
kind: LLMNode
name: chat
prompts:
  system:
    en: You answer questions about users.
    ru: Ты отвечаешь на вопросы о пользователях.
tools:
  - get_user
"""

GET_USER = """
kind: ToolNode
name: get_user
description:
  en: Find a user by id
  ru: Найти пользователя по id
func: users.get_user
arguments:
  - name: user_id
    type: integer
    description: The user's id
"""


def get_user(user_id: int) -> str:
    """The tool the specs above name: a user's record, with the argument's Python type."""
    return f"user {user_id} ({type(user_id).__name__})"


FUNCTIONS = {"users.get_user": get_user}


def write(root: Path, files: dict[str, str]) -> Path:
    """Write each ``name: yaml`` into ``root/specs`` and return that folder."""
    specs = root / "specs"
    for name, text in files.items():
        path = specs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return specs


class ByPrompt:
    """A chat model that answers each LLMNode from its own script, told apart by the start
    of the system prompt: a ScriptedModel counts replies per conversation, and each node
    has a conversation of its own."""

    name = "by-prompt"

    def __init__(self, scripts: dict[str, Any]) -> None:
        self.scripts = scripts

    def _model(self, messages: Any) -> Any:
        system = messages[0].content if messages and messages[0].role == "system" else ""
        return next(m for prefix, m in self.scripts.items() if system.startswith(prefix))

    async def complete(self, messages: Any, tools: Any = ()) -> Any:
        return await self._model(messages).complete(messages, tools)

    def stream(self, messages: Any, tools: Any = ()) -> Any:
        return self._model(messages).stream(messages, tools)
