"""Chat messages: system, user, assistant (with tool calls) and tool results.

Messages are frozen pydantic models, so they are stored as JSON and read back as the same
types (the ``role`` field tells them apart). A message is a value: to change one, write a
new message with the same ``id``; ``add_messages`` replaces it in place.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    Self,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationInfo,
    model_validator,
)

from nodestep._display.text import model_repr
from nodestep._state.field_spec import REDUCER_CONTEXT

__all__ = [
    "AnyMessage",
    "AssistantMessage",
    "RemoveMessage",
    "SystemMessage",
    "TokenUsage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
    "applies_removals",
    "holds_messages",
    "to_message",
    "to_messages",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
# pydantic's slots of a model, set past a frozen model's refusing __setattr__.
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class _Value(BaseModel):
    """A frozen model that a deep copy shares instead of copying.

    The engine deep-copies a state field the first time a node reads it, so that a node
    cannot change what other tasks see. A message never changes in place, so copying it
    would only make every model step cost more on a long conversation.
    """

    model_config = _FROZEN

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> _Value:
        return self

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Return a copy with ``update``'s values (not validated), as pydantic's does.

        Made here: a message has no extras and no private attributes (a subclass that adds
        some gets pydantic's own copy), so its copy is its fields' dict with the changes,
        where pydantic's takes five calls to find that out. A model's reply is copied twice
        a turn (its usage, its id), about 1% of a turn of W10's agent.
        """
        if deep or self.__pydantic_private__ is not None or self.__pydantic_extra__ is not None:
            return super().model_copy(update=update, deep=deep)
        # The new object's own (empty) dict filled in place, and pydantic's three slots set
        # through their descriptors: replacing ``__dict__`` and setting each slot by
        # ``object.__setattr__`` cost 2k instructions more a copy (15.3k -> 13.2k), and a
        # turn of W10's agent makes four.
        cls = type(self)
        copied = cls.__new__(cls)
        held = copied.__dict__
        held.update(self.__dict__)
        fields_set = set(self.__pydantic_fields_set__)
        if update:
            held.update(update)
            fields_set.update(update)
        _set_extra(copied, None)
        _set_fields_set(copied, fields_set)
        _set_private(copied, None)
        return copied

    def __repr__(self) -> str:
        return model_repr(self)

    def __eq__(self, other: object) -> bool:
        # Frozen, no private attributes, no extras: the fields are the value. pydantic's
        # own __eq__ checks more, at several times the cost, and a store compares every
        # message of a conversation when it checks a checkpoint's JSON form.
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # tool call args are dicts


class ToolCall(_Value):
    """A call of a tool that a model asks for.

    Attributes:
        name: The tool's name.
        args: The arguments, as the model wrote them (a JSON object).
        id: The call's id; a tool message answers it with ``tool_call_id``. The model node
            gives a call without one an id made from its message's id.
    """

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str = ""


class SystemMessage(_Value):
    """Instructions for the model."""

    role: Literal["system"] = "system"
    content: str
    id: str | None = None


class UserMessage(_Value):
    """What the user says."""

    role: Literal["user"] = "user"
    content: str
    id: str | None = None
    name: str | None = None


class TokenUsage(_Value):
    """The tokens one model call took: what it read and what it wrote.

    Attributes:
        input_tokens: The tokens of the conversation sent (the prompt).
        output_tokens: The tokens of the reply.
        total_tokens: Both; ``input_tokens + output_tokens`` unless the provider says
            otherwise.
    """

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)

    # The validator below only fills in a total its own dump always holds: a store may
    # take the dump as read back equal without validating it again (see
    # nodestep._state.read_back.KEEPS_DUMP).
    __nodestep_keeps_dump__: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _total_by_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("total_tokens") is None:
            data = {
                **data,
                "total_tokens": data.get("input_tokens", 0) + data.get("output_tokens", 0),
            }
        return data


class AssistantMessage(_Value):
    """The model's reply: text, tool calls, or both.

    Attributes:
        content: The reply's text.
        tool_calls: The tools the model asks to call.
        id: The message's id (the model node gives its reply one).
        model: The model that wrote it, as the model node called it; ``None`` for a
            message not written by a model node.
        usage: The tokens the call took, when the model reports them.
        finish_reason: Why the model stopped: ``"stop"``, ``"tool_calls"``, ``"length"``,
            ``"content_filter"``, ... as the provider says it, or ``None``.
    """

    role: Literal["assistant"] = "assistant"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    id: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None
    finish_reason: str | None = None


class ToolMessage(_Value):
    """The result of one tool call, sent back to the model.

    Attributes:
        tool_call_id: The id of the ``ToolCall`` it answers.
        name: The tool's name.
        status: ``"error"`` when the tool failed or was refused; the content says why.
    """

    role: Literal["tool"] = "tool"
    content: str
    tool_call_id: str
    name: str = ""
    status: Literal["ok", "error"] = "ok"
    id: str | None = None


R = TypeVar("R", bound=Callable[..., Any])

_REMOVERS: list[Callable[..., Any]] = []


def applies_removals(reducer: R) -> R:
    """Mark ``reducer`` as one that applies ``RemoveMessage`` writes (``add_messages``).

    A mark rather than a test for ``add_messages`` itself: that reducer lives in
    ``_conversation``, which imports this module.
    """
    _REMOVERS.append(reducer)
    return reducer


_ONLY_THERE = (
    "RemoveMessage only works in a field with the add_messages reducer, which removes the "
    "message with its id: write it, without Replace, to a field such as "
    "messages: Messages (Annotated[list[AnyMessage], add_messages]), or leave it out"
)


class RemoveMessage(_Value):
    """A write that removes the message with ``id`` from the list (``add_messages``).

    It is an instruction to the ``add_messages`` reducer, never a message to keep: a state
    write that would store it as it is (in a field without ``add_messages``, in a
    ``Replace``, in a ``Send`` payload) is refused.
    """

    role: Literal["remove"] = "remove"
    id: str

    # What a state write says when a field's type has no place for it (see _state).
    state_write_hint: ClassVar[str] = _ONLY_THERE

    @model_validator(mode="wrap")
    @classmethod
    def _applied_by_its_reducer(
        cls, data: Any, handler: ModelWrapValidatorHandler[RemoveMessage], info: ValidationInfo
    ) -> RemoveMessage:
        context = info.context
        if isinstance(context, dict) and REDUCER_CONTEXT in context:
            reducer = context[REDUCER_CONTEXT]
            if not any(reducer is remover for remover in _REMOVERS):
                raise ValueError(_not_applied(data, reducer))
        return handler(data)


def _not_applied(data: Any, reducer: Any) -> str:
    found = getattr(data, "id", None) or (data.get("id") if isinstance(data, dict) else None)
    how = (
        "written with Replace, in a Send payload or to a field without a reducer"
        if reducer is None
        else f"by the reducer {getattr(reducer, '__name__', reducer)!r}"
    )
    return f"RemoveMessage(id={found!r}) would be stored as a message, {how}. {_ONLY_THERE}"


AnyMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage | RemoveMessage,
    Field(discriminator="role"),
]
"""Any message type; the ``role`` field says which."""

_ROLES: dict[str, type[_Value]] = {
    "system": SystemMessage,
    "user": UserMessage,
    "human": UserMessage,
    "assistant": AssistantMessage,
    "ai": AssistantMessage,
}
_CANONICAL: dict[type[_Value], str] = {
    SystemMessage: "system",
    UserMessage: "user",
    AssistantMessage: "assistant",
}
_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage, RemoveMessage)
_MESSAGE_CLASSES = frozenset(_MESSAGE_TYPES)
_SHAPES = (
    "a message, a string (a user message), a (role, content) pair such as ('user', 'hi'), or "
    "a dict with 'role' and 'content'"
)


def holds_messages(annotation: Any) -> bool:
    """Tell whether a field type is a list of message types (``list[AnyMessage]``).

    ``list[UserMessage | AssistantMessage]`` and ``list[AnyMessage] | None`` are; ``list``,
    ``list[Any]``, ``list[dict]`` and ``Any`` are not.
    """
    origin = get_origin(annotation)
    if origin is Annotated:
        return holds_messages(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return bool(kinds) and all(holds_messages(a) for a in kinds)
    return origin is list and len(get_args(annotation)) == 1 and _messages(get_args(annotation)[0])


def _messages(item: Any) -> bool:
    """Tell whether every value of the item type ``item`` is a message."""
    origin = get_origin(item)
    if origin is Annotated:
        return _messages(get_args(item)[0])
    if origin in (Union, types.UnionType):
        return all(_messages(a) for a in get_args(item))
    return isinstance(item, type) and issubclass(item, _MESSAGE_TYPES)


def _bad(value: object, why: str) -> ValueError:
    return ValueError(f"cannot make a message from {value!r}: {why}. Write {_SHAPES}")


def to_message(value: object) -> Any:
    """Return ``value`` as a message, from any of the shorthands.

    Takes a message, a string (a user message), a ``(role, content)`` pair with role
    ``"user"``/``"human"``, ``"assistant"``/``"ai"`` or ``"system"``, or a dict with a
    ``role``.

    Raises:
        ValueError: a shape that is none of these, or an unknown role; the message lists
            the shapes that work.
    """
    # A message of one of the classes themselves, the usual write, by its type: an
    # isinstance() against the tuple asks pydantic's metaclass (an ABC) of each class before
    # the message's own, a Python call each (about 4k instructions for a tool message; a
    # turn of W10's agent writes four messages).
    if type(value) in _MESSAGE_CLASSES or isinstance(value, _MESSAGE_TYPES):
        return value
    if isinstance(value, str):
        return UserMessage(content=value)
    if isinstance(value, tuple):
        if len(value) != 2 or not all(isinstance(part, str) for part in value):
            raise _bad(value, "a tuple must be two strings, (role, content)")
        role, content = value
        cls = _ROLES.get(role)
        if cls is None:
            raise _bad(value, f"unknown role {role!r}; the roles are {', '.join(_ROLES)}")
        return cls(content=content)
    if isinstance(value, dict):
        role = value.get("role")
        cls = _ROLES.get(role) if isinstance(role, str) else None
        if role == "tool":
            return ToolMessage.model_validate(value)
        if role == "remove":
            return RemoveMessage.model_validate(value)
        if cls is None:
            raise _bad(value, f"the dict's role {role!r} is not one of {', '.join(_ROLES)}, tool")
        return cls.model_validate({**value, "role": _CANONICAL[cls]})
    raise _bad(value, f"a {type(value).__name__} is not a message")


def to_messages(value: object) -> list[Any]:
    """Return a write of messages as a list: one message or shorthand, or a list of them.

    Raises:
        ValueError: an item that ``to_message`` does not take.
    """
    if isinstance(value, list):
        return [to_message(item) for item in value]
    if isinstance(value, Sequence) and not isinstance(value, str | tuple):
        return [to_message(item) for item in value]
    return [to_message(value)]
