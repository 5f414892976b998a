"""What an agent keeps in its thread: the state class and the records in it.

Everything an agent remembers is a field of its graph's state, so every store keeps it,
a restart reads it back, and a fork or time travel sees it as it was:

- one conversation per LLMNode, a ``Messages`` field, so a turn stores only its new
  messages and costs the same at turn 200 as at turn 2;
- ``nodes``: each node's record (status, last error, last input and output);
- ``inbox``: inputs waiting for a node (the user's text, a tool's result routed on);
- ``results``: tool results waiting for the LLMNode that called the tool;
- ``outputs``: the text a node ended a step with, by node.

``inbox`` and ``results`` are keyed by id and merged with ``keyed``, where a ``None``
removes the key: a node takes exactly the entries it consumed, so two nodes of one
superstep never undo each other's writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model

from nodestep._state.base import BaseState
from nodestep._state.reducers import checks_field_type, merge_dict
from nodestep.agents._conversation import MessageList, Messages

__all__ = [
    "AgentStateBase",
    "CallResult",
    "Delivery",
    "NodeRecord",
    "PendingCall",
    "StepOutput",
    "conversation_fields",
    "keyed",
    "state_class",
]

Status = Literal["idle", "running", "completed", "failed"]


class _Shared(BaseModel):
    """A frozen record of immutable fields, which a deep copy shares instead of copying.

    The engine deep-copies a dict field (``inbox``, ``results``, ``outputs``) the first time
    a node reads it, so that a node cannot change what other tasks see; a record in it
    never changes, and pydantic's own deep copy of one costs a few µs every step.
    """

    model_config = ConfigDict(frozen=True)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self


class Delivery(_Shared):
    """An input waiting for a node.

    Attributes:
        to: The node it is for.
        text: What it says.
        source: The node it comes from, or ``None`` for the caller's input.
        order: Where it goes among the inputs a node takes at once (a call's index).
    """

    to: str
    text: str
    source: str | None = None
    order: int = 0


class CallResult(_Shared):
    """A tool's result, waiting for the LLMNode that called it.

    Attributes:
        content: The text the model is shown.
        status: ``"error"`` when the call did not fit, or the tool failed.
    """

    content: str
    tool: str = ""
    status: Literal["ok", "error"] = "ok"


class PendingCall(BaseModel):
    """A tool call on its way to its ToolNode: a tool task's input.

    Attributes:
        id: The call's id.
        name: The tool's name, as the model called it.
        args: The arguments, as the model wrote them.
        caller: The LLMNode that called it.
        index: Its place among the calls of the reply.
        alone: Whether it is the only call its reply sends to a ToolNode (then a plain
            ``def`` tool runs on the event loop's thread; see ``steps.tool_step``).
    """

    id: str = ""
    name: str = ""
    args: dict[str, Any] = Field(default_factory=dict)
    caller: str = ""
    index: int = 0
    alone: bool = False


class NodeRecord(BaseModel):
    """A node's record: how its last run went, and what it took and gave.

    Attributes:
        kind: The node's kind (``LLMNode``, ``ToolNode``, ...).
        status: ``idle`` (never ran), ``running``, ``completed`` or ``failed``.
        has_error: Whether its last run ended with an error (a failure, or a tool call
            that did not fit or raised, which went back to the model).
        error: That error's message, or ``None``.
        input: What its last run took: a text, the texts of several inputs, or for a
            ToolNode a dict with the call's ``name`` and ``args``.
        output: The text its last run gave.

    Its types are precise (no ``Any`` but the tool's arguments), so the store can tell
    from the type that its JSON form reads back equal (``nodestep._state.read_back``)
    and skip validating it back on every step.
    """

    model_config = ConfigDict(frozen=True)

    kind: str = ""
    status: Status = "idle"
    has_error: bool = False
    error: str | None = None
    input: str | list[str] | dict[str, Any] | None = None
    output: str | None = None

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        # Shared, as a ``_Shared`` record is, while every field is immutable: a record of a
        # running node, or of one that took a text. Each step's input marks its start node
        # running, and the engine deep-copies a run's input: pydantic's deep copy cost an
        # agent's turn (W10) about 1%.
        if self.input is None or type(self.input) is str:
            return self
        return super().__deepcopy__(memo)


class StepOutput(_Shared):
    """The text a node ended a step with.

    Attributes:
        run: The id of the run (the step) it belongs to.
        text: The text.
        order: Its place among the outputs of one step.
    """

    run: str
    text: str
    order: int = 0


def _not_a_dict(annotation: Any) -> str | None:
    if get_origin(annotation) is dict:
        return None
    return "keyed merges dicts by key: give the field a dict type, e.g. dict[str, int | None]"


# Marked: its result is the current dict with the write's entries, both of the field's
# type, so the merged value is not validated again (``reducers.keeps_field_type``).
@checks_field_type(_not_a_dict)
def keyed(current: Mapping[str, Any] | None, update: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``update`` into ``current`` by key; a ``None`` value removes its key."""
    out = dict(current or {})
    for key, value in update.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def conversation_fields(names: list[str]) -> dict[str, str]:
    """Return the state field that holds each LLMNode's conversation, by node name.

    The names are made from the node names, so the same specs give the same state class
    in every process, and a stored thread reads back into it.
    """
    out: dict[str, str] = {}
    for name in sorted(names):
        base = "conversation_" + "".join(c if c.isalnum() else "_" for c in name)
        field, n = base, 1
        while field in out.values():
            n += 1
            field = f"{base}_{n}"
        out[name] = field
    return out


class AgentStateBase(BaseState):
    """The base of every agent's state class.

    Attributes:
        chat_messages: The field of the start node's conversation (``None`` when the
            start node is no LLMNode): what a chat client of a served agent reads as the
            thread's ``messages``. A class attribute, never stored.
    """

    chat_messages: ClassVar[str | None] = None


def state_class(fields: dict[str, str], chat: str | None = None) -> type[BaseState]:
    """Return the state class of an agent whose LLMNodes keep their conversation in
    ``fields`` (from ``conversation_fields``), with ``chat`` as its ``chat_messages``."""
    definitions: dict[str, Any] = {
        "nodes": (Annotated[dict[str, NodeRecord], merge_dict], Field(default_factory=dict)),
        "inbox": (Annotated[dict[str, Delivery | None], keyed], Field(default_factory=dict)),
        "results": (Annotated[dict[str, CallResult | None], keyed], Field(default_factory=dict)),
        "outputs": (Annotated[dict[str, StepOutput], merge_dict], Field(default_factory=dict)),
    }
    for field in fields.values():
        definitions[field] = (Messages, Field(default_factory=MessageList))
    state: type[AgentStateBase] = create_model("AgentState", __base__=AgentStateBase, **definitions)
    state.chat_messages = chat
    return state
