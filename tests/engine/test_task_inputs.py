"""Task inputs: a Send payload validated against the input model of the node it starts."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    InMemoryStateStore,
    NodeContext,
    Send,
    StateUpdateError,
    add,
    node,
)
from store_helpers import records_sync


class Doc(BaseState):
    text: str = "one two three four five"
    counts: Annotated[list[str], add] = Field(default_factory=list)


class Part(BaseModel):
    index: int
    chunk: str


class Options(BaseModel):
    words: int = 2


class Other(BaseModel):
    x: int = 0


@node
def count(state: Doc, part: Part) -> dict:
    return {"counts": [f"{part.index}:{len(part.chunk.split())}"]}


def splitter(payload_of):
    @node(goto=[count])
    def split(state: Doc) -> Command:
        words = state.text.split()
        chunks = [" ".join(words[i : i + 2]) for i in range(0, len(words), 2)]
        return Command(goto=[Send(count, payload_of(i, c)) for i, c in enumerate(chunks)])

    return split


def graph_with(payload_of, **options) -> Graph[Doc]:
    return Graph(Doc, **options).flow(START >> splitter(payload_of), count >> END)


def test_a_node_gets_its_send_payload_as_its_input_model():
    graph = graph_with(lambda i, c: {"index": i, "chunk": c})
    assert graph.invoke({}).state.counts == ["0:2", "1:2", "2:1"]


def test_a_model_instance_is_a_payload_too_and_inputs_are_stored_as_json():
    store = InMemoryStateStore()
    graph = graph_with(lambda i, c: Part(index=i, chunk=c), state_store=store)
    assert graph.invoke({}, thread_id="t").state.counts == ["0:2", "1:2", "2:1"]
    step0 = next(r for r in records_sync(store, "t") if r["type"] == "superstep_completed")
    routes = step0["tasks"]["split"]["routes"]
    assert routes[1] == {"send": "count", "input": {"index": 1, "chunk": "three four"}}


def test_input_fields_are_not_state_fields_and_never_reach_the_state():
    graph = graph_with(lambda i, c: {"index": i, "chunk": c})
    state = graph.invoke({}).state
    assert not hasattr(state, "index") and "chunk" not in state.model_dump()


def test_a_payload_value_that_does_not_fit_the_model_names_node_field_and_fix():
    graph = graph_with(lambda i, c: {"index": f"#{i}", "chunk": c})
    with pytest.raises(StateUpdateError) as info:
        graph.invoke({})
    assert str(info.value) == (
        "Node 'split' sent 'count' a payload that does not fit its input model Part: field "
        "'index': Input should be a valid integer, unable to parse string as an integer "
        "(got '#0'). Send values that fit Part (index, chunk), or change the model."
    )
    assert info.value.field == "index" and info.value.writer == "split"


def test_a_missing_payload_field_is_refused():
    graph = graph_with(lambda i, c: {"index": i})
    with pytest.raises(StateUpdateError, match=r"field 'chunk': Field required\. Send values"):
        graph.invoke({})


def test_a_payload_key_the_model_lacks_is_refused_with_the_fix():
    graph = graph_with(lambda i, c: {"index": i, "chunk": c, "text": "x"})
    with pytest.raises(StateUpdateError) as info:
        graph.invoke({})
    assert str(info.value).startswith(
        "Node 'split' sent 'count' the key 'text', which is not a field of its input model "
        "Part (fields: index, chunk); the whole payload is the task's input. Add 'text' to "
        "Part, or leave it out of the payload."
    )
    assert info.value.field == "text"


def test_a_node_with_required_inputs_reached_by_an_edge_fails_with_the_fix():
    @node
    def first(state: Doc) -> None:
        return None

    graph = Graph(Doc).flow(START >> first >> count >> END)
    with pytest.raises(GraphExecutionError) as info:
        graph.invoke({})
    message = str(info.value)
    assert message.startswith(
        "Node 'count' takes a task input Part, but its task 'count' was started by an edge, "
        "not by Send, so it has none, and field 'index' of Part: Field required."
    )
    assert message.endswith(
        "Start 'count' with Send(count, {...}), or give Part's fields defaults."
    )


def test_an_input_model_with_defaults_runs_from_an_edge():
    @node
    def head(state: Doc, options: Options, *, ctx: NodeContext) -> dict:
        return {"counts": [f"{ctx.node}:{options.words}"]}

    assert Graph(Doc).flow(START >> head >> END).invoke({}).state.counts == ["head:2"]


def test_a_continued_run_hands_the_node_the_stored_input():
    store = InMemoryStateStore()
    graph = graph_with(
        lambda i, c: {"index": i, "chunk": c}, state_store=store, interrupt_before=["count"]
    )
    graph.invoke({}, thread_id="t")
    fresh = Graph(Doc, state_store=store).flow(START >> splitter(lambda i, c: {}), count >> END)
    assert fresh.invoke(None, thread_id="t").state.counts == ["0:2", "1:2", "2:1"]


def test_two_input_parameters_are_refused():
    def two(state, part: Part, other: Other):
        return None

    with pytest.raises(GraphConfigError, match=r"has 2 parameters annotated with a model"):
        node(two)


def test_a_positional_only_input_parameter_is_refused():
    def positional(state, part: Part, /):
        return None

    with pytest.raises(GraphConfigError, match=r"takes its input 'part' as a positional-only"):
        node(positional)


def test_a_model_annotation_that_cannot_be_resolved_says_where_to_define_the_model():
    def local(state, options: LocalModel):  # noqa: F821 - never resolved, on purpose
        return None

    with pytest.raises(GraphConfigError, match=r"define it at the top level of the module"):
        node(local)


def test_the_debug_stream_shows_a_task_input_as_the_input():
    graph = graph_with(lambda i, c: {"index": i, "chunk": c})
    routes = next(
        e.data["routes"]
        for e in graph.stream({}, stream_mode="debug")
        if e.mode == "debug" and e.data.get("type") == "routes"
    )
    assert routes["split"][0] == {"send": "count", "input": {"index": 0, "chunk": "one two"}}


class Tagged(BaseModel):
    """An input model with a model_validate and a model_dump of its own."""

    index: int
    chunk: str

    @classmethod
    def model_validate(cls, obj, **kwargs):  # type: ignore[no-untyped-def,override]
        if isinstance(obj, dict) and "chunk" in obj:
            obj = {**obj, "chunk": obj["chunk"].upper()}
        return super().model_validate(obj, **kwargs)

    def model_dump(self, **kwargs):  # type: ignore[no-untyped-def,override]
        data = super().model_dump(**kwargs)
        data["chunk"] = data["chunk"].lower()
        return data


@node
def tagged(state: Doc, part: Tagged) -> dict:
    return {"counts": [f"{part.index}:{part.chunk}"]}


def test_an_input_models_own_model_validate_and_model_dump_are_the_ones_called():
    # The engine calls a model's validator and serializer directly (fewer instructions)
    # only where the model keeps pydantic's own model_validate and model_dump.
    @node(goto=[tagged])
    def split(state: Doc) -> Command:
        return Command(goto=[Send(tagged, {"index": 0, "chunk": "ab"})])

    store = InMemoryStateStore()
    graph = Graph(Doc, state_store=store).flow(START >> split, tagged >> END)
    # Sent: upper-cased by model_validate, stored lower-cased by model_dump, and read back
    # into the task through model_validate again.
    assert graph.invoke({}, thread_id="t").state.counts == ["0:AB"]
    step0 = next(r for r in records_sync(store, "t") if r["type"] == "superstep_completed")
    assert step0["tasks"]["split"]["routes"] == [
        {"send": "tagged", "input": {"index": 0, "chunk": "ab"}}
    ]
    assert Graph(Doc).flow(START >> split, tagged >> END).invoke({}).state.counts == ["0:AB"]
