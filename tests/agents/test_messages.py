"""Messages and the add_messages reducer: shorthands, ids, replace, remove, storage."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter, ValidationError

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    Node,
    Replace,
    Send,
    StateUpdateError,
    add,
    node,
)
from nodestep.agents import (
    AnyMessage,
    AssistantMessage,
    MessageList,
    Messages,
    RemoveMessage,
    SystemMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
    add_messages,
)
from nodestep.agents._conversation import next_message_id, next_message_ids
from nodestep.agents._messages import to_message


def test_shorthands_become_typed_messages():
    merged = add_messages(
        None,
        [
            "plain text",
            ("user", "a pair"),
            ("human", "a human"),
            ("ai", "an ai"),
            ("system", "rules"),
            {"role": "assistant", "content": "a dict"},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ],
    )
    assert [type(m) for m in merged] == [
        UserMessage,
        UserMessage,
        UserMessage,
        AssistantMessage,
        SystemMessage,
        AssistantMessage,
        ToolMessage,
    ]
    assert [m.content for m in merged][:2] == ["plain text", "a pair"]


def test_a_single_shorthand_is_one_message():
    assert [m.content for m in add_messages(None, ("user", "hi"))] == ["hi"]
    assert [m.content for m in add_messages(None, "hi")] == ["hi"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (("bot", "hi"), "unknown role 'bot'"),
        (("user", "hi", "extra"), "two strings"),
        ({"content": "no role"}, "role None"),
        (42, "a int is not a message"),
    ],
)
def test_a_bad_shorthand_says_which_shapes_work(value, says):
    with pytest.raises(ValueError, match=says) as caught:
        to_message(value)
    assert "('user', 'hi')" in str(caught.value)


def test_messages_without_ids_get_deterministic_ids():
    first = add_messages(None, ["a", "b"])
    again = add_messages(None, ["a", "b"])
    assert [m.id for m in first] == ["msg-1", "msg-2"] == [m.id for m in again]
    assert [m.id for m in add_messages(first, "c")] == ["msg-1", "msg-2", "msg-3"]


def test_new_ids_continue_after_the_largest_number():
    merged = add_messages(None, [UserMessage(content="x", id="agent-7"), "y"])
    assert merged[-1].id == "msg-8"
    assert next_message_id(merged, "agent") == "agent-9"


def test_a_message_with_a_known_id_replaces_it_in_place():
    merged = add_messages(None, ["a", "b", "c"])
    replaced = add_messages(merged, UserMessage(content="B", id="msg-2"))
    assert [m.content for m in replaced] == ["a", "B", "c"]
    assert [m.content for m in merged] == ["a", "b", "c"]  # the old list is unchanged


def test_remove_message_removes_by_id_and_refuses_an_unknown_id():
    merged = add_messages(None, ["a", "b", "c"])
    left = add_messages(merged, RemoveMessage(id="msg-2"))
    assert [m.content for m in left] == ["a", "c"]
    assert add_messages(left, "d")[-1].id == "msg-4"  # ids are never reused
    with pytest.raises(ValueError, match=r"RemoveMessage\(id='nope'\) names no message"):
        add_messages(left, RemoveMessage(id="nope"))


def test_an_old_list_that_is_not_the_tip_still_merges_right():
    base = add_messages(None, ["a", "b"])
    one = add_messages(base, "from one")
    two = add_messages(base, UserMessage(content="B", id="msg-2"))  # base is no tip now
    assert [m.content for m in one] == ["a", "b", "from one"]
    assert [m.content for m in two] == ["a", "B"]
    assert [m.content for m in add_messages(one, UserMessage(content="A", id="msg-1"))] == [
        "A",
        "b",
        "from one",
    ]


def test_the_list_is_read_only_and_says_how_to_write():
    merged = add_messages(None, ["a"])
    for change in (
        lambda: merged.append("b"),
        lambda: merged.extend(["b"]),
        lambda: merged.__setitem__(0, "b"),
        lambda: merged.__delitem__(0),
        lambda: merged.clear(),
    ):
        with pytest.raises(TypeError, match="add_messages appends them"):
            change()
    assert copy.deepcopy(merged) is merged
    assert pickle.loads(pickle.dumps(merged)) == merged


def _reference(current: list, update: list) -> list:
    """add_messages written the slow, obvious way, for the property test."""
    out = list(current)
    for message in update:
        if isinstance(message, RemoveMessage):
            out = [m for m in out if m.id != message.id]
            continue
        found = [i for i, m in enumerate(out) if m.id == message.id]
        if found:
            out[found[0]] = message
        else:
            out.append(message)
    return out


_ids = st.sampled_from(["a-1", "a-2", "b-3", "c-4", "d-5"])
_writes = st.lists(
    st.lists(
        st.one_of(
            st.builds(lambda i, t: UserMessage(content=t, id=i), _ids, st.text(max_size=3)),
            st.builds(lambda i: RemoveMessage(id=i), _ids),
        ),
        max_size=4,
    ),
    max_size=8,
)


@pytest.mark.slow
@given(_writes)
def test_add_messages_matches_the_obvious_implementation(writes):
    fast: list = MessageList()
    slow: list = []
    for write in writes:
        known_after = {m.id for m in slow}
        ok = []
        for m in write:  # a removal must name a message there at that point
            if isinstance(m, RemoveMessage):
                if m.id not in known_after:
                    continue
                known_after.discard(m.id)
            else:
                known_after.add(m.id)
            ok.append(m)
        fast = add_messages(fast, ok)
        slow = _reference(slow, ok)
        assert list(fast) == slow


class Chat(MessagesState):
    turns: int = 0


class Loose(MessagesState):
    notes: Messages = Field(default_factory=MessageList)


@node
def reply(state: Chat) -> dict:
    call = ToolCall(name="look", args={"topic": "tea"}, id="c1")
    return {
        "messages": [AssistantMessage(content=f"seen {len(state.messages)}", tool_calls=[call])],
        "turns": state.turns + 1,
    }


def test_a_graph_takes_shorthands_as_input_and_reports_a_bad_one():
    graph = Graph(Chat).flow(START >> reply, reply >> END)
    result = graph.invoke({"messages": [("user", "hi"), "and more"]})
    assert [m.role for m in result.state.messages] == ["user", "user", "assistant"]
    assert isinstance(result.state.messages, MessageList)
    with pytest.raises(StateUpdateError, match="unknown role 'robot'"):
        graph.invoke({"messages": [("robot", "hi")]})


def test_messages_are_stored_and_read_back_as_the_same_types(tmp_path: Path):
    path = tmp_path / "chat.jsonl"
    graph = Graph(Chat, state_store=FilesystemStateStore(path)).flow(START >> reply, reply >> END)
    live = graph.invoke({"messages": ["hi"]}, thread_id="t").state.messages
    anyio.run(graph.state_store.aclose)  # type: ignore[union-attr]

    reopened = Graph(Chat, state_store=FilesystemStateStore(path)).flow(
        START >> reply, reply >> END
    )
    stored = anyio.run(reopened.get_state, "t").value.messages
    assert list(stored) == list(live)
    assert isinstance(stored[1], AssistantMessage)
    assert stored[1].tool_calls[0] == ToolCall(name="look", args={"topic": "tea"}, id="c1")
    more = reopened.invoke({"messages": ["again"]}, thread_id="t").state.messages
    assert [m.id for m in more] == ["msg-1", "msg-2", "msg-3", "msg-4"]
    anyio.run(reopened.state_store.aclose)  # type: ignore[union-attr]


def test_replaying_the_history_gives_the_same_messages_and_ids():
    graph = Graph(Chat, state_store=InMemoryStateStore()).flow(START >> reply, reply >> END)
    first = graph.invoke({"messages": ["hi"]}, thread_id="a").state.messages
    second = graph.invoke({"messages": ["hi"]}, thread_id="b").state.messages
    assert list(first) == list(second)


def test_nodes_read_the_stored_conversation_without_copying_or_reindexing_it():
    seen: list[bool] = []

    @node
    def look(state: MessagesState) -> dict:
        index = state.messages._index  # the index add_messages left on the list
        seen.append(index is not None and index.tip is state.messages)
        return {"messages": ["next"]}

    graph = Graph(MessagesState).flow(START >> look, look >> END)
    graph.invoke({"messages": ["hi"]})
    assert seen == [True]


_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=5)
)
_messages = st.one_of(
    st.builds(SystemMessage, content=st.text(max_size=8), id=st.none() | st.text(max_size=4)),
    st.builds(UserMessage, content=st.text(max_size=8), name=st.none() | st.text(max_size=4)),
    st.builds(
        AssistantMessage,
        content=st.text(max_size=8),
        tool_calls=st.lists(
            st.builds(
                ToolCall,
                name=st.text(min_size=1, max_size=4),
                args=st.dictionaries(st.text(max_size=3), _json_scalars, max_size=3),
                id=st.text(max_size=4),
            ),
            max_size=2,
        ).map(tuple),
    ),
    st.builds(
        ToolMessage,
        content=st.text(max_size=8),
        tool_call_id=st.text(max_size=4),
        status=st.sampled_from(["ok", "error"]),
    ),
)


@pytest.mark.slow
@given(st.lists(_messages, max_size=6))
def test_every_message_survives_the_stored_json_form(messages):
    from nodestep._state.schema import StateSchema

    spec = StateSchema.of(MessagesState).fields["messages"]
    value = MessageList(messages)
    data = spec.to_json(value)  # raises if the value does not read back equal
    back = spec.from_json(data)
    assert list(back) == messages
    assert [type(m) for m in back] == [type(m) for m in messages]


def test_a_write_that_fails_half_way_leaves_the_conversation_as_it_was():
    base = add_messages(None, ["a", "b"])
    with pytest.raises(ValueError, match="names no message"):
        add_messages(base, ["c", RemoveMessage(id="nope")])
    assert [m.content for m in base] == ["a", "b"]
    after = add_messages(base, [UserMessage(content="B", id="msg-2"), "d"])
    assert [(m.id, m.content) for m in after] == [("msg-1", "a"), ("msg-2", "B"), ("msg-3", "d")]


# -- RemoveMessage is a write to add_messages, never a message to keep ------------------------

_ONLY_WITH_ADD_MESSAGES = "RemoveMessage only works in a field with the add_messages reducer"


class PlainList(BaseState):
    messages: list[AnyMessage] = Field(default_factory=list)


class Typed(BaseState):
    messages: list[UserMessage | AssistantMessage] = Field(default_factory=list)


class Appended(BaseState):
    messages: Annotated[list[AnyMessage], add] = Field(default_factory=list)


def _writing(state: type[BaseState], update: dict, store: bool = False) -> Graph:
    @node
    def write(state) -> dict:
        return update

    graph = Graph(state, state_store=InMemoryStateStore() if store else None)
    return graph.flow(START >> write, write >> END)


def test_replace_refuses_a_remove_message_saying_it_needs_add_messages():
    update = {"messages": Replace([UserMessage(id="u1", content="a"), RemoveMessage(id="u1")])}
    with pytest.raises(StateUpdateError) as caught:
        _writing(MessagesState, update).invoke({})
    message = str(caught.value)
    assert "RemoveMessage(id='u1') would be stored as a message, written with Replace" in message
    assert _ONLY_WITH_ADD_MESSAGES in message
    assert caught.value.field == "messages" and caught.value.writer == "write"


@pytest.mark.parametrize("state", [PlainList, Appended], ids=["plain", "add"])
def test_a_field_without_add_messages_refuses_a_remove_message(state):
    with pytest.raises(StateUpdateError, match=_ONLY_WITH_ADD_MESSAGES):
        _writing(state, {"messages": [RemoveMessage(id="u1")]}).invoke({})
    with pytest.raises(StateUpdateError, match=_ONLY_WITH_ADD_MESSAGES):
        Graph(state).flow(START >> _noop, _noop >> END).invoke(
            {"messages": [RemoveMessage(id="x")]}
        )


def test_a_field_of_other_message_types_says_remove_message_needs_add_messages():
    with pytest.raises(StateUpdateError) as caught:
        _writing(Typed, {"messages": [RemoveMessage(id="u1")]}).invoke({})
    assert "Expected list[" in str(caught.value)
    assert _ONLY_WITH_ADD_MESSAGES in str(caught.value)


def test_update_state_removes_through_add_messages_and_refuses_to_store_a_removal():
    graph = _writing(MessagesState, {"messages": [UserMessage(id="u1", content="a")]}, True)
    graph.invoke({}, thread_id="t")
    with pytest.raises(StateUpdateError, match=_ONLY_WITH_ADD_MESSAGES) as caught:
        graph.update_state_sync("t", {"messages": Replace([RemoveMessage(id="u1")])})
    assert caught.value.writer == "update_state"
    graph.update_state_sync("t", {"messages": [RemoveMessage(id="u1")]})
    assert graph.get_state_sync("t").value.messages == []

    plain = _writing(PlainList, {"messages": [UserMessage(id="u1", content="a")]}, True)
    plain.invoke({}, thread_id="t")
    with pytest.raises(StateUpdateError, match=_ONLY_WITH_ADD_MESSAGES):
        plain.update_state_sync("t", {"messages": [RemoveMessage(id="u1")]})
    assert [m.id for m in plain.get_state_sync("t").value.messages] == ["u1"]


class Part(BaseModel):
    messages: list[AnyMessage]


def test_a_send_payload_refuses_a_remove_message():
    @node
    def summarise(state: MessagesState) -> dict:
        return {}

    @node
    def read_part(state: MessagesState, part: Part) -> dict:
        return {}

    for target in (summarise, read_part):

        @node(goto=[target])
        def fan_out(state: MessagesState, target: Node = target) -> Send:
            return Send(target, {"messages": [RemoveMessage(id="u1")]})

        graph = Graph(MessagesState).flow(START >> fan_out, target >> END)
        with pytest.raises(StateUpdateError, match=_ONLY_WITH_ADD_MESSAGES):
            graph.invoke({"messages": [UserMessage(id="u1", content="a")]})


@pytest.mark.parametrize(
    "annotation", [list[Any], list[dict], Any, list, list[str], dict[str, AnyMessage]]
)
def test_add_messages_is_refused_on_a_field_that_is_not_a_list_of_messages(annotation):
    class Loose(BaseState):
        messages: Annotated[annotation, add_messages] = Field(default_factory=list)

    with pytest.raises(GraphConfigError) as caught:
        Graph(Loose)
    assert str(caught.value).startswith(
        "Field 'messages' of Loose uses the add_messages reducer, but it merges chat messages "
        "by id, and the field's type"
    )
    assert "messages: Messages = Field(default_factory=MessageList)" in str(caught.value)


@pytest.mark.parametrize(
    "annotation",
    [list[AnyMessage], list[AnyMessage] | None, list[UserMessage | AssistantMessage]],
)
def test_add_messages_takes_any_list_of_message_types(annotation):
    class Chat(BaseState):
        messages: Annotated[annotation, add_messages] = Field(default_factory=list)

    graph = Graph(Chat).flow(START >> _noop, _noop >> END)
    result = graph.invoke({"messages": [UserMessage(content="hi")]})
    assert [m.id for m in result.state.messages] == ["msg-1"]


@node
def _noop(state) -> None:
    return None


def _copy_parts(message: BaseModel) -> tuple[Any, ...]:
    return (
        type(message),
        message.__dict__,
        message.__pydantic_fields_set__,
        message.__pydantic_extra__,
        message.__pydantic_private__,
    )


@pytest.mark.parametrize(
    "update",
    [None, {}, {"id": "chat-2"}, {"id": "chat-2", "usage": TokenUsage(input_tokens=3)}],
)
def test_a_messages_copy_is_the_one_pydantic_makes(update: dict[str, Any] | None) -> None:
    reply = AssistantMessage(
        content="hi", tool_calls=[ToolCall(name="look", args={"q": 1}, id="c-1")], id="chat-1"
    )
    copied = reply.model_copy(update=update)
    assert copied is not reply
    assert _copy_parts(copied) == _copy_parts(BaseModel.model_copy(reply, update=update))
    assert copied.__dict__ is not reply.__dict__
    assert copied.__pydantic_fields_set__ is not reply.__pydantic_fields_set__


def test_a_message_class_with_private_attributes_is_copied_by_pydantic() -> None:
    class Noted(UserMessage):
        _note: str = PrivateAttr(default="kept")

    message = Noted(content="hi")
    message._note = "changed"
    copied = message.model_copy(update={"content": "bye"})
    assert copied.content == "bye" and copied._note == "changed"


def test_the_next_ids_of_a_conversation_are_those_of_next_message_id() -> None:
    messages = add_messages([], [UserMessage(content="a", id="chat-7"), UserMessage(content="b")])
    ids = next_message_ids(messages, "chat")
    assert [next(ids) for _ in range(3)] == [
        next_message_id(messages, "chat", offset) for offset in (1, 2, 3)
    ]
    assert next_message_id(messages, "chat") == "chat-9"


class _TaggedUser(UserMessage):
    """A subclass of a message class: still a message, taken as it is."""

    tag: str = ""


@pytest.mark.parametrize(
    "message",
    [
        SystemMessage(content="s"),
        UserMessage(content="u"),
        AssistantMessage(content="a"),
        ToolMessage(content="t", tool_call_id="c", name="n"),
        RemoveMessage(id="x"),
        _TaggedUser(content="u", tag="t"),
    ],
)
def test_a_message_written_is_taken_as_it_is(message):
    assert to_message(message) is message


def test_a_write_of_messages_holds_the_very_messages_written() -> None:
    written = [
        SystemMessage(content="s"),
        UserMessage(content="u", id="chat-1"),
        AssistantMessage(content="a", tool_calls=[ToolCall(name="look", args={}, id="c-1")]),
        ToolMessage(content="t", tool_call_id="c-1", name="look"),
        _TaggedUser(content="u", tag="t"),
    ]
    held = TypeAdapter(Messages).validate_python(written)
    assert type(held) is MessageList and held is not written
    assert len(held) == len(written)
    assert all(h is w for h, w in zip(held, written, strict=True))


def test_a_message_whose_role_is_not_its_classes_is_refused_when_written() -> None:
    # Made without validation: its role picks UserMessage, which it is not.
    odd = AssistantMessage.model_construct(role="user", content="hi")
    with pytest.raises(ValidationError, match="instance of UserMessage"):
        TypeAdapter(Messages).validate_python([UserMessage(content="ok"), odd])
