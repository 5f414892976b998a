"""The new-run form, the interrupt form and the fork form read what a person typed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sandbox_graphs import chat, pricing

from nodestep import Interrupt
from nodestep.sandbox._answers import questions, resume_answers
from nodestep.sandbox._compare import edited_values
from nodestep.sandbox._forms import FormError, form_fields, read_input


def test_each_field_gets_the_control_its_type_suggests() -> None:
    kinds = {f.name: f.kind for f in form_fields(pricing)}
    assert kinds == {"items": "json", "note": "str", "total": "int"}
    assert [(f.name, f.kind) for f in form_fields(chat)] == [("messages", "chat")]


def test_empty_controls_keep_the_defaults_and_the_rest_are_read_by_type() -> None:
    form = {"field.items": '["tea"]', "field.note": "  ", "field.total": "7"}
    assert read_input(pricing, form) == {"items": ["tea"], "total": 7}
    assert read_input(chat, {"field.messages": "hi"}) == {
        "messages": [{"type": "human", "content": "hi"}]
    }


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"field.total": "seven"}, "Field 'total' must be a whole number; got 'seven'"),
        ({"field.items": "[tea"}, "Field 'items' must be JSON; got '[tea'"),
    ],
)
def test_a_value_of_the_wrong_form_is_refused_with_the_field_and_the_fix(
    form: dict[str, str], said: str
) -> None:
    with pytest.raises(FormError, match="leave it empty to keep the default") as caught:
        read_input(pricing, form)
    assert said in str(caught.value)


def _pending(key: str, payload: Any) -> Interrupt:
    task, _, ident = key.partition(":")
    return Interrupt(key=key, id=ident, node=task, task_id=task, payload=payload)


def test_a_plain_interrupt_is_answered_by_its_key_as_json_or_text() -> None:
    asked = questions({"a:x": _pending("a:x", "ok?"), "b:y": _pending("b:y", {"n": 1})})
    answers = resume_answers(asked, {"answer.a:x": "yes", "answer.b:y": '{"n": 2}'})
    assert answers == {"a:x": "yes", "b:y": {"n": 2}}
    with pytest.raises(FormError, match="Interrupt 'b:y' has no answer"):
        resume_answers(asked, {"answer.a:x": "yes"})


def test_each_tool_call_is_approved_edited_or_rejected() -> None:
    calls = [{"id": "c1", "name": "pay", "args": {"n": 1}}, {"id": "c2", "name": "mail"}]
    asked = questions({"tools:approve": _pending("tools:approve", {"tool_calls": calls})})
    assert [c["id"] for c in asked[0].tool_calls] == ["c1", "c2"]
    form = {
        "decision.tools:approve.c1": "edit",
        "args.tools:approve.c1": '{"n": 2}',
        "decision.tools:approve.c2": "reject",
        "reason.tools:approve.c2": "not now",
    }
    assert resume_answers(asked, form) == {
        "tools:approve": {"c1": {"edit": {"n": 2}}, "c2": {"reject": "not now"}}
    }
    form["args.tools:approve.c1"] = "[2]"
    with pytest.raises(FormError, match=r"tool call 'c1' \(pay\) must be a JSON object"):
        resume_answers(asked, form)
    del form["decision.tools:approve.c2"]
    form["args.tools:approve.c1"] = "{}"
    with pytest.raises(FormError, match="Choose approve, edit or reject for tool call 'c2'"):
        resume_answers(asked, form)


def test_the_fork_form_writes_only_the_fields_it_changed() -> None:
    before = {"items": ["tea"], "note": "a", "total": 3}
    form = {"value.items": '[\n  "tea"\n]', "value.note": '"b"', "value.total": "3"}
    assert edited_values(before, form) == {"note": "b"}
    with pytest.raises(FormError, match="Field 'note' must be JSON to fork with it"):
        edited_values(before, {"value.note": "b"})


@given(st.text(max_size=30))
def test_any_text_in_a_string_box_reaches_the_input_unchanged_but_trimmed(text: str) -> None:
    got = read_input(pricing, {"field.note": text})
    assert got == ({"note": text.strip()} if text.strip() else {})
