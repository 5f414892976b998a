"""Text and secrets a store cannot keep: a lone surrogate in a plain ``str`` field is refused
naming the field and where in the text it is, in the run that wrote it, as in any other
type; a ``SecretStr`` is refused with the way to pass a secret instead."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field, SecretBytes, SecretStr

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, StateStoreError, node
from nodestep._state.schema import StateSchema
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio

HINT = (
    "(half of a UTF-16 pair, such as a cut emoji), which UTF-8 cannot encode. Repair the "
    "text where it comes in, e.g. text.encode('utf-8', 'replace').decode() turns it into '?'."
)


class Text(BaseState):
    text: str = ""
    maybe: str | None = None
    texts: list[str] = Field(default_factory=list)
    other: int = 0


SCHEMA = StateSchema.of(Text)


def test_a_plain_str_field_refuses_a_lone_surrogate_naming_the_field_and_its_index() -> None:
    with pytest.raises(StateStoreError) as caught:
        SCHEMA.fields["text"].to_json("cut emoji \ud83d")
    assert str(caught.value) == (
        f"Field 'text' cannot be stored as JSON: its str holds the lone surrogate '\\ud83d' "
        f"at index 10 {HINT}"
    )


def test_an_optional_str_field_names_the_index_of_its_lone_surrogate_too() -> None:
    with pytest.raises(StateStoreError) as caught:
        SCHEMA.fields["maybe"].to_json("é \udc80 \udc80")
    assert str(caught.value) == (
        f"Field 'maybe' cannot be stored as JSON: its str holds the lone surrogate '\\udc80' "
        f"at index 2 {HINT}"
    )


@pytest.mark.parametrize("text", ["", "plain", "déjà vu 🙂", "\U0010ffff"])
def test_a_plain_str_field_keeps_any_text_utf_8_can_encode(text: str) -> None:
    assert SCHEMA.fields["text"].to_json(text) == text


@node
def cut_text(state: Text) -> dict[str, Any]:
    return {"text": "half an emoji \ud83d"}


async def test_a_run_writing_a_lone_surrogate_to_a_str_field_fails_and_records_it(
    store: StateStore,
) -> None:
    graph = Graph(Text, state_store=store).flow(START >> cut_text, cut_text >> END)
    with pytest.raises(StateStoreError, match="Field 'text' cannot be stored as JSON: its str"):
        await graph.ainvoke({"other": 1}, thread_id="t")
    events = [e.type for e in (await graph.history("t")).events]
    assert events == ["checkpoint", "run_started", "run_failed"]
    snapshot = await graph.get_state("t")
    assert (snapshot.status, snapshot.error_type, snapshot.failed_node) == (
        "failed",
        "StateStoreError",
        "cut_text",
    )
    assert snapshot.value.other == 1


async def test_update_state_refuses_a_lone_surrogate_in_a_str_field_naming_the_call(
    store: StateStore,
) -> None:
    graph = Graph(Text, state_store=store)
    await graph.update_state("t", {"other": 1}, create=True)
    before = await store.last_sequence("t", "main")
    with pytest.raises(StateStoreError) as caught:
        await graph.update_state("t", {"text": "x\ud83d"})
    assert str(caught.value).startswith(
        "update_state on thread 't' got a value it cannot store: Field 'text' cannot be "
        "stored as JSON: its str holds the lone surrogate '\\ud83d' at index 1"
    )
    assert await store.last_sequence("t", "main") == before


class Keyed(BaseState):
    key: SecretStr | None = None
    blob: SecretBytes | None = None
    count: int = 0


@node
def count(state: Keyed) -> dict[str, Any]:
    return {"count": 1}


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [("key", "abc", "SecretStr"), ("blob", b"abc", "SecretBytes")],
    ids=["str", "bytes"],
)
def test_a_secret_in_the_state_is_refused_saying_how_to_pass_a_secret(
    field: str, value: Any, kind: str
) -> None:
    graph = Graph(Keyed, state_store=InMemoryStateStore()).flow(START >> count, count >> END)
    with pytest.raises(StateStoreError) as caught:
        graph.invoke({field: value}, thread_id="t")
    message = str(caught.value)
    assert message.startswith(
        f"Field '{field}' does not survive a JSON round trip: a value of type {kind} comes back "
        f"different"
    )
    assert (
        f"A {kind} is masked in its JSON form, so a store would keep '**********': keep "
        f"secrets out of the state and pass them with context= (never stored) or a "
        f"credentials provider (credentials=)."
    ) in message
    assert "JSON-friendly types" not in message
