"""The conversation field: the ``add_messages`` reducer and the list it keeps.

``add_messages`` appends new messages, replaces a message written again with the same id,
and removes one on a ``RemoveMessage``. Finding a message by id must not scan the whole
conversation on every step, so the list it returns carries an index of ids to positions.
The index belongs to the newest list made from it (the tip): a run extends its tip step
after step at a cost that does not grow with the conversation. A list that is not the tip
(after a fork, or read back from a store) builds its index once, on its next write.

Ids are deterministic: a message written without one gets ``msg-<n>``, where ``n`` is one
more than the largest number ending any id so far, so replaying a history gives the same
ids, in any process.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Annotated, Any, NoReturn, cast

from pydantic import Field, GetCoreSchemaHandler, ValidationError
from pydantic_core import core_schema

from nodestep._display.text import short_repr
from nodestep._state.base import BaseState
from nodestep._state.exact_dump import Dumper, array_dumper, exact_dumper
from nodestep._state.field_types import type_name
from nodestep._state.reducers import checks_field_type
from nodestep.agents._messages import (
    AnyMessage,
    AssistantMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    applies_removals,
    holds_messages,
    to_messages,
)

__all__ = [
    "MessageList",
    "Messages",
    "MessagesState",
    "add_messages",
    "next_message_id",
    "next_message_ids",
]


class _Index:
    """Positions of ids in one list, and the largest number ending an id."""

    __slots__ = ("ids", "seq", "tip")

    def __init__(self, messages: list[Any]) -> None:
        self.ids: dict[str, int] = {}
        self.seq = 0
        self.tip: object = None
        for position, message in enumerate(messages):
            self.ids[message.id] = position
            self.seq = max(self.seq, _number(message.id))


def _number(message_id: str | None) -> int:
    if not message_id:
        return 0
    _, _, tail = message_id.rpartition("-")
    return int(tail) if tail.isdigit() and len(tail) < 19 else 0


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError(
        "The messages list of a state is read-only: a node returns its new messages, e.g. "
        "{'messages': [reply]}, and add_messages appends them (or replaces a message with "
        "the same id)."
    )


class MessageList(list[Any]):
    """The read-only list of messages that a ``Messages`` field holds.

    It is a ``list`` for reading (index, slice, iterate, ``len``). Changing it in place
    raises ``TypeError``: the engine shares it between steps instead of copying it, and a
    node writes new messages through its update.
    """

    __slots__ = ("_index",)
    # Never changed once made, and its messages are values: the engine shares the list
    # (between steps, runs and get_state calls) instead of copying or re-encoding it.
    __nodestep_frozen__ = True

    def __init__(self, messages: Any = ()) -> None:
        list.__init__(self, messages)
        self._index: _Index | None = None

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> MessageList:
        return self  # read-only, and its messages are frozen: nothing to copy

    def __copy__(self) -> MessageList:
        return self

    def __repr__(self) -> str:
        return short_repr(self, width=300)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageList, (list(self),))


def _index_of(messages: list[Any]) -> _Index:
    index = getattr(messages, "_index", None)
    if index is None or index.tip is not messages:
        index = _Index(messages)
        index.tip = messages
        if isinstance(messages, MessageList):
            messages._index = index
    return index


def next_message_id(messages: list[Any], prefix: str = "msg", offset: int = 1) -> str:
    """Return the id the ``offset``-th next message of ``messages`` gets, as ``prefix-<n>``.

    ``n`` counts on from the largest number ending an id of ``messages``. A model node
    names its reply this way before it is written, so that streamed tokens name it; an
    LLMNode of an ``Agent`` names the user's message and its reply so (``prefix`` is the
    node's name); code that shows a message before it is stored can name it the same.

    Args:
        messages: The conversation: messages (or objects with an ``id``).
        prefix: What the id starts with.
        offset: Which next message: 1 for the next.
    """
    return f"{prefix}-{_index_of(messages).seq + offset}"


def next_message_ids(messages: list[Any], prefix: str) -> Iterator[str]:
    """Return the ids the next messages of ``messages`` get, in order: those
    ``next_message_id`` gives for offsets 1, 2, ...

    The conversation's index is read once: an LLMNode of an ``Agent`` names two or three
    messages a turn, each a call and an index lookup less so.
    """
    seq = _index_of(messages).seq
    return (f"{prefix}-{seq + offset}" for offset in itertools.count(1))


def _not_messages(annotation: Any) -> str | None:
    if holds_messages(annotation):
        return None
    return (
        f"it merges chat messages by id, and the field's type {type_name(annotation)} is not "
        f"a list of messages. Declare messages: Messages = Field(default_factory=MessageList), "
        f"or give the field a list of message types, such as list[AnyMessage]"
    )


@checks_field_type(_not_messages)
@applies_removals
def add_messages(current: list[Any] | None, update: Any) -> MessageList:
    """Merge a write of messages into the conversation.

    A message with a new id (or none) is appended; one with the id of a message already
    there replaces it in place; a ``RemoveMessage(id=...)`` removes it. The update may be
    one message, a string, a ``(role, content)`` pair, a dict, or a list of these.

    Raises:
        ValueError: a shape that is not a message, or a ``RemoveMessage`` whose id is not
            in the conversation.
    """
    base: list[Any] = current if current is not None else []
    index = _index_of(base)
    try:
        result = _merged(base, to_messages(update), index)
    except BaseException:
        index.tip = None  # changed half-way: the next merge builds it afresh
        raise
    result._index = index
    index.tip = result
    return result


def _merged(base: list[Any], update: list[Any], index: _Index) -> MessageList:
    # The new list is made once, as a copy of the base's item pointers (a few µs for
    # thousands of messages), and filled through list's own methods: MessageList's refuse.
    out = MessageList(base)
    ids = index.ids
    for message in update:
        if isinstance(message, RemoveMessage):
            out = MessageList(_removed(out, message.id))
            index.ids = ids = _Index(out).ids
            continue
        if message.id is None:
            index.seq += 1
            message = message.model_copy(update={"id": f"msg-{index.seq}"})
        else:
            index.seq = max(index.seq, _number(message.id))
        position = ids.get(message.id)
        if position is None:
            ids[message.id] = len(out)
            list.append(out, message)
        else:
            list.__setitem__(out, position, message)
    return out


def _removed(messages: list[Any], message_id: str) -> list[Any]:
    kept = [m for m in messages if m.id != message_id]
    if len(kept) == len(messages):
        known = ", ".join(repr(m.id) for m in messages[-5:]) or "none"
        raise ValueError(
            f"RemoveMessage(id={message_id!r}) names no message of the conversation (the "
            f"last ids are {known}); remove a message by an id it has."
        )
    return kept


# The role by which ``AnyMessage``'s tagged union picks each class: an instance of the
# class itself with that role is handed back by it as it is. ``RemoveMessage`` is left
# out: its validator checks who applies it.
_ROLE_OF: dict[type[Any], str] = {
    SystemMessage: "system",
    UserMessage: "user",
    AssistantMessage: "assistant",
    ToolMessage: "tool",
}


def _as_list(value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
    # A node's write, a list of messages of the classes themselves, is what pydantic would
    # give back item for item (the union hands a frozen message of its tag's own class back
    # as it is): taken as it is, without the union's isinstance(message, Mapping), an ABC's
    # Python frame for each message (two writes of two messages a turn of W10's agent).
    # The list is a node's own: _freeze makes the MessageList of it, a copy, as before.
    if type(value) is list:
        for message in value:
            role = _ROLE_OF.get(type(message))
            if role is None or message.role != role:
                break
        else:
            return value
    # Stored conversations (lists of dicts with canonical roles) validate as they are, at
    # pydantic's speed; only a value that does not is read through the shorthands.
    try:
        return handler(value)
    except ValidationError:
        return handler(to_messages(value))


def _freeze(value: list[Any]) -> MessageList:
    return value if isinstance(value, MessageList) else MessageList(value)


# The JSON form of a conversation, or ``MISS`` (see ``_Shorthands``).
_dump_conversation = array_dumper(MessageList, cast(Dumper, exact_dumper(AnyMessage)))


class _Shorthands:
    """Pydantic metadata of ``Messages``: take the shorthands, hold a ``MessageList``.

    A plain object rather than pydantic's ``BeforeValidator``: the state schema checks a
    reducer field's whole merged value again when its metadata comes from pydantic (for
    constraints such as ``max_length``), which would cost every step a pass over the whole
    conversation. The items are validated when they are written.
    """

    # The JSON form a store writes, built without pydantic's dump and a validation back
    # (nodestep._state.exact_dump.OWN_DUMP): a MessageList of messages whose forms read
    # back equal, as every message of the conversation's types does unless built with
    # model_construct. A stored conversation validates as it is, into a MessageList.
    __nodestep_dump__ = staticmethod(_dump_conversation)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        inner = core_schema.no_info_wrap_validator_function(_as_list, handler(source))
        return core_schema.no_info_after_validator_function(_freeze, inner)


Messages = Annotated[list[AnyMessage], _Shorthands(), add_messages]
"""A state field type for a conversation: ``messages: Messages = Field(default_factory=...)``.

Writes may use the shorthands (``"hi"``, ``("user", "hi")``, dicts) and merge with
``add_messages``; the field reads as a read-only ``MessageList``.
"""


class MessagesState(BaseState):
    """A state with one field, ``messages``: the conversation. Subclass it to add fields."""

    messages: Messages = Field(default_factory=MessageList)
