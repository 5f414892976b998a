"""``Skills``: instructions loaded on demand from a folder of ``SKILL.md`` files.

Each skill is a folder with a ``SKILL.md`` that starts with a front matter naming it::

    ---
    name: pdf-forms
    description: Fill in PDF forms.
    ---
    The instructions...

The model is told each skill's name and description; it calls ``load_skill(name)`` to read
the instructions when it needs them, so a long skill costs tokens only when it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware, Replacement
from nodestep.agents import ModelMiddlewareContext, SystemMessage, Tool, ToolMiddlewareContext, tool

__all__ = ["Skill", "Skills"]


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name, description and the file of its instructions."""

    name: str
    description: str
    path: Path


def _read_skill(path: Path) -> Skill:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise GraphConfigError(
            f"{path} is not UTF-8 text: byte {e.object[e.start : e.start + 1]!r} at offset "
            f"{e.start} does not decode. Save the file as UTF-8."
        ) from None
    except OSError as e:
        raise GraphConfigError(
            f"Cannot read the skill file {path}: {e.strerror or e}. Check that it is a file "
            f"nodestep may read."
        ) from None
    lines = text.splitlines()
    fields: dict[str, str] = {}
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
    missing = [k for k in ("name", "description") if not fields.get(k)]
    if missing:
        raise GraphConfigError(
            f"{path} has no {' and no '.join(missing)} in its front matter; start it with "
            f"'---', 'name: ...', 'description: ...', '---'."
        )
    return Skill(fields["name"], fields["description"], path)


def _body(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:], start=1):
            if line.strip() == "---":
                return "\n".join(lines[i + 1 :]).strip()
    return "\n".join(lines).strip()


@tool
def load_skill(name: str) -> str:
    """Load the instructions of the skill with this name."""
    raise GraphConfigError(
        "load_skill reads the skills folder of the Skills middleware: pass "
        "middleware=[Skills('path/to/skills')] to the graph or agent."
    )


class Skills(Middleware):
    """List the skills of ``folder`` to the model and offer ``load_skill`` to read one.

    The folder is read when the middleware is made; a skill's instructions each time the
    model loads it.

    Args:
        folder: A folder whose subfolders hold ``SKILL.md`` files.

    Raises:
        GraphConfigError: the folder does not exist, a ``SKILL.md`` cannot be read as
            UTF-8 text or lacks its name or description, or two skills share a name.
    """

    def __init__(self, folder: str | Path) -> None:
        root = Path(folder)
        if not root.is_dir():
            raise GraphConfigError(
                f"Skills({str(folder)!r}): no such folder; give the folder whose subfolders "
                f"hold SKILL.md files."
            )
        self.skills: dict[str, Skill] = {}
        for path in sorted(root.glob("*/SKILL.md")):
            found = _read_skill(path)
            if found.name in self.skills:
                raise GraphConfigError(
                    f"Two skills are named {found.name!r}: {self.skills[found.name].path} and "
                    f"{path}; rename one."
                )
            self.skills[found.name] = found

    def tools(self) -> list[Tool]:
        """Return the ``load_skill`` tool."""
        return [load_skill]

    def before_model(self, ctx: ModelMiddlewareContext) -> Replacement | None:
        """Tell the model which skills there are, in a system message after the others."""
        if ctx.request is None or not self.skills:
            return None
        listed = "\n".join(f"- {s.name}: {s.description}" for s in self.skills.values())
        note = SystemMessage(
            content=f"Skills you can load with load_skill(name) when a task needs one:\n{listed}"
        )
        messages = ctx.request.messages
        cut = 1 if messages and isinstance(messages[0], SystemMessage) else 0
        return ctx.replace(ctx.request.replace(messages=[*messages[:cut], note, *messages[cut:]]))

    def before_tool(self, ctx: ToolMiddlewareContext) -> Replacement | None:
        """Answer ``load_skill`` with the skill's instructions."""
        if ctx.tool_name != "load_skill":
            return None
        name = ctx.args.get("name")
        found = self.skills.get(name) if isinstance(name, str) else None
        if found is None:
            return ctx.refuse(
                f"There is no skill {name!r}; the skills are {', '.join(sorted(self.skills))}."
            )
        return ctx.respond(_body(found.path))

    def __repr__(self) -> str:
        return f"Skills({sorted(self.skills)!r})"
