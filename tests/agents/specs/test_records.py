"""The agent's state records: typed so that the store need not read them back to check."""

from __future__ import annotations

import pytest

from nodestep import StateStoreError
from nodestep._state.schema import StateSchema
from nodestep.agents._specs.records import (
    CallResult,
    Delivery,
    NodeRecord,
    StepOutput,
    conversation_fields,
    state_class,
)

SCHEMA = StateSchema.of(state_class(conversation_fields(["chat"])))


@pytest.mark.parametrize("field", ["nodes", "inbox", "results", "outputs"])
def test_the_record_fields_are_in_the_read_back_rule(field: str):
    assert SCHEMA.fields[field].reads_back is not None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nodes", {"chat": NodeRecord(kind="LLMNode", status="completed", input=["hi"])}),
        ("nodes", {"f": NodeRecord(kind="FunctionNode", input="text", output="done")}),
        (
            "nodes",
            {
                "t": NodeRecord(
                    kind="ToolNode",
                    input={"name": "get", "args": {"id": 1, "tags": ["a"], "deep": {"k": None}}},
                    output="found",
                )
            },
        ),
        ("inbox", {"a": Delivery(to="chat", text="hi"), "b": None}),
        ("results", {"c": CallResult(content="ok", tool="t", status="error")}),
        ("outputs", {"r": StepOutput(run="r", text="done", order=2)}),
    ],
)
def test_a_record_skips_the_read_back_and_still_reads_back_equal(field: str, value: object):
    spec = SCHEMA.fields[field]
    value = spec.validate(value, "test")
    assert spec.reads_back is not None and spec.reads_back(value)
    assert spec.from_json(spec.to_json(value)) == value


def test_a_tool_input_whose_args_are_not_plain_json_gets_the_full_check():
    spec = SCHEMA.fields["nodes"]
    record = NodeRecord(kind="ToolNode", input={"name": "get", "args": {"at": (1, 2)}})
    value = spec.validate({"t": record}, "test")
    assert spec.reads_back is not None and not spec.reads_back(value)
    with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
        spec.to_json(value)
