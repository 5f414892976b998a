"""What a state class may declare: refused when the schema compiles, or applied to every write."""

from __future__ import annotations

import dataclasses
import functools
import operator
from typing import Annotated, Any, Literal, Optional

import pytest
from annotated_types import Gt
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from nodestep import END, START, BaseState, Graph, GraphConfigError, StateUpdateError, add, node
from nodestep._state.channels import LastValueChannel, ReducerChannel
from nodestep._state.schema import StateSchema


def _echo_graph(state_cls: type[BaseState]) -> Graph:
    @node
    def echo(state: Any) -> None:
        return None

    return Graph(state_cls).flow(START >> echo, echo >> END)


# -- validators, serializers and model_config ---------------------------------------------


class WithFieldValidator(BaseState):
    name: str = ""

    @field_validator("name")
    @classmethod
    def shout(cls, value: str) -> str:
        return value.upper()


class WithModelValidator(BaseState):
    low: int = 0
    high: int = 1

    @model_validator(mode="after")
    def ordered(self) -> WithModelValidator:
        return self


class WithFieldSerializer(BaseState):
    name: str = ""

    @field_serializer("name")
    def hide(self, value: str) -> str:
        return "***"


class WithModelSerializer(BaseState):
    name: str = ""

    @model_serializer
    def whole(self) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(
    ("cls", "label", "names"),
    [
        (WithFieldValidator, "@field_validator", "shout"),
        (WithModelValidator, "@model_validator", "ordered"),
        (WithFieldSerializer, "@field_serializer", "hide"),
        (WithModelSerializer, "@model_serializer", "whole"),
    ],
)
def test_state_class_with_validators_or_serializers_is_refused_naming_them(cls, label, names):
    with pytest.raises(
        GraphConfigError,
        match=rf"State class {cls.__name__} has {label} \({names}\), which nodestep never runs.*"
        r"Annotated\[str, AfterValidator\(fn\)\]",
    ):
        Graph(cls)


@pytest.mark.parametrize(
    ("config", "shown"),
    [
        (ConfigDict(extra="allow"), "extra='allow'"),
        (ConfigDict(revalidate_instances="always"), "revalidate_instances='always'"),
        (ConfigDict(validate_default=True), "validate_default=True"),
        (
            ConfigDict(alias_generator=str.upper),
            "alias_generator=<method 'upper' of 'str' objects>",
        ),
    ],
)
def test_state_class_with_config_nodestep_cannot_honour_is_refused_naming_the_key(config, shown):
    cls = type(
        "Configured", (BaseState,), {"model_config": config, "__annotations__": {"n": int}, "n": 0}
    )
    with pytest.raises(
        GraphConfigError,
        match=rf"State class Configured sets model_config {shown}, which nodestep cannot honour",
    ):
        Graph(cls)


def test_state_class_with_harmless_or_per_field_config_compiles():
    class Configured(BaseState):
        model_config = ConfigDict(
            extra="forbid",
            title="Configured",
            arbitrary_types_allowed=True,
            str_strip_whitespace=True,
            use_attribute_docstrings=True,
        )
        name: str = ""

    assert StateSchema.of(Configured).fields["name"]


def test_str_strip_whitespace_applies_to_input_and_node_updates():
    class Stripped(BaseState):
        model_config = ConfigDict(str_strip_whitespace=True)
        name: str = ""
        tags: Annotated[list[str], add] = Field(default_factory=list)

    @node
    def pad(state: Stripped) -> dict[str, Any]:
        return {"name": f"  {state.name}!  ", "tags": ["  b "]}

    graph = Graph(Stripped).flow(START >> pad, pad >> END)
    state = graph.invoke({"name": "  ada ", "tags": [" a"]}).state
    assert (state.name, state.tags) == ("ada!", ["a", "b"])


def test_validate_assignment_validates_a_nodes_in_place_assignment():
    class Checked(BaseState):
        model_config = ConfigDict(validate_assignment=True)
        count: int = 0

    @node
    def assign(state: Checked) -> Checked:
        state.count = "7"  # type: ignore[assignment]
        return state

    assert Graph(Checked).flow(START >> assign, assign >> END).invoke({}).state.count == 7


def test_frozen_refuses_a_nodes_in_place_assignment():
    class Fixed(BaseState):
        model_config = ConfigDict(frozen=True)
        count: int = 0

    @node
    def assign(state: Fixed) -> Fixed:
        state.count = 1
        return state

    with pytest.raises(ValidationError, match="Instance is frozen"):
        Graph(Fixed).flow(START >> assign, assign >> END).invoke({})


def test_a_state_class_with_model_post_init_is_refused():
    class PostInit(BaseState):
        n: int = 0

        def model_post_init(self, context: Any, /) -> None:
            self.n += 1

    with pytest.raises(GraphConfigError, match="State class PostInit defines model_post_init"):
        Graph(PostInit)


def test_a_state_class_with_private_attributes_and_a_model_post_init_is_refused():
    class PostInitPrivate(BaseState):
        _seen: int = PrivateAttr(0)
        n: int = 0

        def model_post_init(self, context: Any, /) -> None:
            self._seen += 1

    with pytest.raises(GraphConfigError, match="PostInitPrivate defines model_post_init"):
        Graph(PostInitPrivate)


def test_a_state_class_with_private_attributes_compiles():
    class Private(BaseState):
        _cache: dict[str, int] = PrivateAttr(default_factory=dict)
        n: int = 0

    assert _echo_graph(Private).invoke({"n": 2}).state.n == 2


# -- reducers in Annotated metadata -------------------------------------------------------


class Marker:
    """A class used as plain Annotated metadata."""


class Tally:
    """A callable instance: a reducer."""

    def __call__(self, current: int, update: int) -> int:
        return current + update


class Metadata(BaseState):
    marked: Annotated[int, Marker] = 0
    positive: Annotated[int, Gt(0), Field(le=10)] = 1
    checked: Annotated[str, AfterValidator(str.strip)] = ""
    tally: Annotated[int, Tally()] = 0
    partial: Annotated[int, functools.partial(operator.add)] = 0


def test_a_class_as_annotated_metadata_is_not_taken_for_a_reducer():
    channels = StateSchema.of(Metadata).channels
    assert type(channels["marked"]) is LastValueChannel
    assert type(channels["positive"]) is LastValueChannel
    assert type(channels["checked"]) is LastValueChannel
    assert type(channels["tally"]) is ReducerChannel
    assert type(channels["partial"]) is ReducerChannel


def test_pydantic_metadata_beside_a_class_marker_still_validates():
    schema = StateSchema.of(Metadata)
    with pytest.raises(StateUpdateError, match="Field 'positive' got an invalid value"):
        schema.validate_update({"positive": 11}, "input")
    assert schema.validate_update({"checked": " x ", "marked": "3"}, "input") == [
        ("checked", "x", False),
        ("marked", 3, False),
    ]


@pytest.mark.parametrize(
    "annotation",
    [
        Annotated[list[int], add] | None,
        Optional[Annotated[list[int], add]],  # noqa: UP045 (the spelling under test)
        list[Annotated[list[int], add]],
        dict[str, Annotated[int, operator.add]],
    ],
)
def test_a_reducer_inside_a_union_or_an_item_type_is_refused_with_the_fix(annotation):
    cls = type("Nested", (BaseState,), {"__annotations__": {"items": annotation}, "items": None})
    with pytest.raises(
        GraphConfigError,
        match=r"Field 'items' of Nested has the reducer (add|add) inside its type .*"
        r"Put it around the whole type",
    ):
        Graph(cls)


def test_a_reducer_around_an_optional_type_works():
    class Around(BaseState):
        items: Annotated[list[int] | None, add] = None

    assert _echo_graph(Around).invoke({"items": [1]}).state.items == [1]


# -- defaults, forward references and field types ------------------------------------------


def test_a_default_factory_reading_other_fields_is_refused_when_compiled():
    class Derived(BaseState):
        base: int = 1
        double: int = Field(default_factory=lambda data: data["base"] * 2)

    with pytest.raises(
        GraphConfigError,
        match="Field 'double' of Derived has a default_factory that takes the other fields' values",
    ):
        Graph(Derived)


def test_a_default_factory_without_arguments_gives_fresh_defaults():
    class Fresh(BaseState):
        items: list[int] = Field(default_factory=lambda: [0])

    schema = StateSchema.of(Fresh)
    first, second = schema.defaults(), schema.defaults()
    assert first == {"items": [0]}
    assert first["items"] is not second["items"]


def test_an_unresolvable_forward_reference_is_refused_naming_class_field_and_type():
    class Dangling(BaseState):
        ok: int = 0
        later: Undefined | None = None  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(
        GraphConfigError,
        match="Field 'later' of Dangling names the type 'Undefined', which is not defined",
    ) as info:
        Graph(Dangling)
    assert isinstance(info.value.__cause__, NameError)


@dataclasses.dataclass
class Point:
    x: int = 0
    y: int = 0


def test_a_dataclass_field_works_in_a_state_class_with_model_config():
    class Placed(BaseState):
        model_config = ConfigDict(str_strip_whitespace=True)
        where: Point = Field(default_factory=Point)
        label: str = ""

    state = _echo_graph(Placed).invoke({"where": {"x": 1, "y": 2}, "label": " a "}).state
    assert (state.where, state.label) == (Point(1, 2), "a")


def test_an_arbitrary_type_allowed_by_config_compiles_with_config_on_other_fields():
    class Opaque:
        pass

    class Holder(BaseState):
        model_config = ConfigDict(arbitrary_types_allowed=True, str_to_lower=True)
        thing: Opaque | None = None
        name: str = ""

    schema = StateSchema.of(Holder)
    assert schema.validate_update({"name": "AB"}, "input") == [("name", "ab", False)]


# -- the settings of Field(...) -------------------------------------------------------------


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    lives: int = 1


def _kind_of(value: Any) -> Any:
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


class FieldSettings(BaseState):
    pet: Cat | Dog = Field(default_factory=Cat, discriminator="kind")
    tagged: Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")] = Field(
        default_factory=Cat, discriminator=Discriminator(_kind_of)
    )
    exact: int = Field(default=0, strict=True)
    first_fit: int | str = Field(default=0, union_mode="left_to_right")
    positive: int = Field(default=1, gt=0)


_FIELD_INPUTS = [
    {"pet": {"lives": 3}},
    {"pet": {"kind": "fish"}},
    {"pet": {"kind": "dog", "lives": 2}},
    {"pet": Dog()},
    {"tagged": {"lives": 3}},
    {"tagged": {"kind": "dog"}},
    {"exact": "5"},
    {"exact": 5},
    {"first_fit": "7"},
    {"first_fit": 7.0},
    {"positive": 0},
]


@pytest.mark.parametrize("input", _FIELD_INPUTS, ids=[str(i) for i in _FIELD_INPUTS])
def test_field_settings_validate_each_write_as_pydantic_validates_the_model(input):
    (name, value) = next(iter(input.items()))
    try:
        expected: Any = getattr(FieldSettings(**input), name)
    except ValidationError:
        expected = None
    graph = _echo_graph(FieldSettings)
    try:
        got = getattr(graph.invoke(input).state, name)
    except StateUpdateError as error:
        assert expected is None, f"nodestep refused {value!r}, which pydantic takes: {error}"
        assert error.field == name
        return
    assert expected is not None, f"nodestep took {value!r}, which pydantic refuses"
    assert (got, type(got)) == (expected, type(expected))


def test_a_discriminator_on_an_optional_union_applies_to_each_write():
    class Pets(BaseState):
        first: Cat | Dog | None = Field(default=None, discriminator="kind")

    graph = _echo_graph(Pets)
    with pytest.raises(StateUpdateError, match="Unable to extract tag using discriminator 'kind'"):
        graph.invoke({"first": {"lives": 3}})
    assert graph.invoke({"first": None}).state.first is None


def test_field_validate_default_is_refused_naming_the_field():
    class Defaulted(BaseState):
        n: int = Field(default="5", validate_default=True)  # type: ignore[assignment]

    with pytest.raises(
        GraphConfigError,
        match=r"Field 'n' of Defaulted sets Field\(validate_default=True\), which nodestep "
        r"cannot honour: defaults are not validated",
    ):
        Graph(Defaulted)
