"""Channels: last-value and reducer channels, one per field, and the node trigger channel."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from nodestep import BaseState, InvalidUpdateError, StateUpdateError, add, merge_dict, replace
from nodestep._state.channels import (
    ChannelWrite,
    LastValueChannel,
    ReducerChannel,
    TriggerChannel,
    channel_for,
)
from nodestep._state.schema import StateSchema


def test_channel_for_a_field_without_reducer_or_with_replace_is_last_value():
    assert type(channel_for("x", None)) is LastValueChannel
    assert type(channel_for("x", replace)) is LastValueChannel


def test_channel_for_a_field_with_a_reducer_is_a_merging_reducer_channel():
    channel = channel_for("x", add)
    assert type(channel) is ReducerChannel
    assert channel.merging is True
    assert channel.reducer is add
    assert LastValueChannel("y").merging is False


def test_last_value_channel_write_replaces_the_value():
    assert LastValueChannel("x").apply(1, 2, False) == 2


def test_last_value_channel_takes_one_nodes_equal_writes():
    channel = LastValueChannel("x")
    writes = [ChannelWrite("worker", 3), ChannelWrite("worker", 3), ChannelWrite("worker", 3)]
    assert channel.merge(0, writes, step=4) == 3


def test_last_value_channel_refuses_one_nodes_different_writes():
    channel = LastValueChannel("x")
    writes = [ChannelWrite("worker", 1), ChannelWrite("worker", 2), ChannelWrite("worker", 3)]
    with pytest.raises(
        InvalidUpdateError,
        match=r"Field 'x' got writes from 'worker' in step 4; 3 tasks of one node wrote "
        r"different values to a plain field, .* or let only one of its tasks write it",
    ) as info:
        channel.merge(0, writes, step=4)
    assert (info.value.field, info.value.writers, info.value.step) == ("x", ("worker",), 4)


def test_last_value_channel_tells_equal_values_of_another_type_apart():
    channel = LastValueChannel("x")
    with pytest.raises(InvalidUpdateError, match="wrote different values"):
        channel.merge(0, [ChannelWrite("worker", 1), ChannelWrite("worker", 1.0)], step=0)


def test_plain_field_rejects_two_writers_in_one_step():
    channel = LastValueChannel("answer")
    with pytest.raises(InvalidUpdateError) as info:
        channel.merge(None, [ChannelWrite("b", 1), ChannelWrite("a", 2)], step=3)
    error = info.value
    assert error.field == "answer"
    assert error.writers == ("a", "b")
    assert error.step == 3
    assert isinstance(error, StateUpdateError)
    assert isinstance(error, ValueError)
    message = str(error)
    assert "Field 'answer' got writes from 'a', 'b' in step 3" in message
    assert "a plain field takes one writer per step" in message
    assert "Annotated[T, reducer], e.g. add for lists" in message


def test_conflict_without_a_step_does_not_mention_a_step():
    with pytest.raises(InvalidUpdateError, match=r"from 'a', 'b'; a plain field") as info:
        LastValueChannel("x").merge(None, [ChannelWrite("a", 1), ChannelWrite("b", 2)])
    assert info.value.step is None


def test_reducer_channel_folds_writes_in_their_given_order():
    channel = ReducerChannel("items", add)
    writes = [ChannelWrite("b", ["b1"]), ChannelWrite("a", ["a1"]), ChannelWrite("b", ["b2"])]
    assert channel.merge(["x"], writes, step=0) == ["x", "b1", "a1", "b2"]


def test_reducer_channel_apply_uses_the_reducer_unless_replaced():
    channel = ReducerChannel("items", add)
    assert channel.apply([1], [2], False) == [1, 2]
    assert channel.apply([1], [2], True) == [2]


def test_reducer_channel_takes_a_replace_from_a_single_writer_in_order():
    channel = ReducerChannel("items", add)
    writes = [
        ChannelWrite("a", ["a1"]),
        ChannelWrite("a", ["fresh"], replace=True),
        ChannelWrite("a", ["a2"]),
    ]
    assert channel.merge(["old"], writes, step=1) == ["fresh", "a2"]


def test_replace_on_a_reducer_field_conflicts_with_another_writer():
    channel = ReducerChannel("table", merge_dict)
    writes = [ChannelWrite("a", {"k": 1}, replace=True), ChannelWrite("b", {"j": 2})]
    with pytest.raises(InvalidUpdateError) as info:
        channel.merge({}, writes, step=2)
    assert info.value.field == "table"
    assert info.value.writers == ("a", "b")
    assert info.value.step == 2
    assert "a Replace(...) write does not merge with others" in str(info.value)


def test_a_replace_conflict_on_a_reducer_field_names_the_replacer_and_the_real_fixes():
    channel = ReducerChannel("messages", add)
    writes = [ChannelWrite("greet", ["hello"]), ChannelWrite("summarize", ["s"], replace=True)]
    with pytest.raises(InvalidUpdateError) as info:
        channel.merge(["hi"], writes, step=1)
    assert str(info.value) == (
        "Field 'messages' got writes from 'greet', 'summarize' in step 1; a Replace(...) write "
        "does not merge with others (Replace from 'summarize'). Let a node that Replaces the "
        "field be its only writer in that superstep, or Replace it in a later superstep (a "
        "node after the others), once the field's reducer has merged their writes."
    )


def test_tasks_of_one_node_replacing_with_different_values_are_not_told_to_add_a_reducer():
    channel = ReducerChannel("messages", add)
    writes = [ChannelWrite("w", ["a"], replace=True), ChannelWrite("w", ["b"], replace=True)]
    with pytest.raises(InvalidUpdateError) as info:
        channel.merge([], writes, step=2)
    message = str(info.value)
    assert "merging reducer" not in message
    assert message.endswith(
        "Let only one of its tasks Replace it per superstep; the others can write values for "
        "the field's reducer to merge."
    )


def test_trigger_channels_do_not_share_their_send_lists():
    first, second = TriggerChannel("a"), TriggerChannel("b")
    first.sends.append({})
    assert second.sends == []


class Mixed(BaseState):
    count: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)
    seen: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)


def test_compiled_schema_has_one_channel_per_field_named_after_it():
    channels = StateSchema.of(Mixed).channels
    assert list(channels) == ["count", "log", "seen"]
    assert all(channel.key == name for name, channel in channels.items())
    assert [type(c) for c in channels.values()] == [
        LastValueChannel,
        ReducerChannel,
        ReducerChannel,
    ]


class Bounded(BaseState):
    recent: Annotated[list[int], add, Field(max_length=3)] = Field(default_factory=list)
    loose: Annotated[list[int], add] = Field(default_factory=list)


def test_constraints_of_a_reducer_field_are_checked_on_the_merged_value():
    channel = StateSchema.of(Bounded).channels["recent"]
    writes = [ChannelWrite("a", [1, 2]), ChannelWrite("b", [3, 4])]
    with pytest.raises(
        InvalidUpdateError,
        match=r"Field 'recent' breaks its constraints after merging the writes of 'a', 'b' in "
        r"step 2: List should have at most 3 items after validation, not 4",
    ) as info:
        channel.merge([], writes, step=2)
    assert (info.value.field, info.value.writers, info.value.step) == ("recent", ("a", "b"), 2)
    assert info.value.__cause__ is not None


def test_constraints_of_a_reducer_field_are_checked_after_a_single_write():
    channel = StateSchema.of(Bounded).channels["recent"]
    assert channel.apply([1, 2], [3], False, "a", 1) == [1, 2, 3]
    with pytest.raises(InvalidUpdateError, match="merging the writes of 'a' in step 1"):
        channel.apply([1, 2], [3, 4], False, "a", 1)


def test_only_reducer_fields_with_constraints_check_their_merged_value():
    channels = StateSchema.of(Bounded).channels
    assert isinstance(channels["recent"], ReducerChannel)
    assert channels["recent"].check is not None
    assert isinstance(channels["loose"], ReducerChannel)
    assert channels["loose"].check is None
