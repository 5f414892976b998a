"""Bytes that are not UTF-8 text are refused when stored, with the setting that stores them.

JSON stores bytes as UTF-8 text unless the class says base64, so binary data (an image, a
hash) in a ``bytes`` field has no JSON form. The error names the field, where the bytes
are, and the ``model_config`` setting, rather than a codec's message and a fix about
clients and handles.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from nodestep import END, START, BaseState, Graph, StateStoreError, node
from nodestep.store import StateStore

FIX = (
    "are not UTF-8 text, which is how JSON stores bytes unless told otherwise. Store them as "
    "base64: set model_config = ConfigDict(ser_json_bytes='base64', val_json_bytes='base64') "
    "on the class that declares them (the state class, or the nested model)."
)


class Blob(BaseModel):
    data: bytes = b""


class Base64Blob(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    data: bytes = b""


class Files(BaseState):
    raw: bytes = b""
    blob: Blob | None = None
    safe: Base64Blob | None = None


class Base64Files(BaseState):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    raw: bytes = b""


def _graph(cls: type[BaseState], update: dict[str, Any], store: StateStore) -> Graph[Any]:
    @node
    def save(state: BaseState) -> dict[str, Any]:
        return update

    return Graph(cls, state_store=store).flow(START >> save, save >> END)


@pytest.mark.parametrize(
    ("update", "held"),
    [
        ({"raw": b"\xff\x00"}, "Field 'raw' cannot be stored as JSON: its bytes "),
        (
            {"blob": Blob(data=b"\x89PNG")},
            "Field 'blob' cannot be stored as JSON: the bytes at ['data'] ",
        ),
    ],
    ids=["field", "nested"],
)
def test_bytes_that_are_not_utf8_are_refused_with_the_base64_setting(
    store: StateStore, update: dict[str, Any], held: str
) -> None:
    with pytest.raises(StateStoreError) as caught:
        _graph(Files, update, store).invoke({}, thread_id="t")
    assert str(caught.value) == held + FIX


@pytest.mark.parametrize(
    ("cls", "update"),
    [
        (Base64Files, {"raw": b"\xff\x00"}),
        (Files, {"safe": Base64Blob(data=b"\x89PNG")}),
        (Files, {"raw": "é".encode()}),
    ],
    ids=["state-class", "nested-model", "utf8-text"],
)
def test_bytes_stored_as_base64_or_as_utf8_text_read_back(
    store: StateStore, cls: type[BaseState], update: dict[str, Any]
) -> None:
    _graph(cls, update, store).invoke({}, thread_id="t")
    again = Graph(cls, state_store=store).get_state_sync("t").value
    for name, value in update.items():
        assert getattr(again, name) == value
