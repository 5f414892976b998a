"""Field types whose JSON form provably reads back equal skip the validate-back check."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import annotated_types
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    computed_field,
    field_serializer,
    field_validator,
    model_validator,
)

from nodestep import BaseState, StateStoreError
from nodestep._state.exact_dump import exact_dumper, own_dumper
from nodestep._state.field_spec import FieldSpec
from nodestep._state.read_back import MISS, read_back_check, within_bounds
from nodestep._state.schema import StateSchema


class Leaf(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    count: int = 0
    flag: bool = False
    note: str | None = None
    kind: Literal["a", "b"] = "a"


class Tree(BaseModel):
    label: str
    leaves: list[Leaf] = Field(default_factory=list)
    by_name: dict[str, Leaf | None] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    either: str | list[str] | None = None


class Circle(BaseModel):
    kind: Literal["circle"] = "circle"
    radius: int = Field(default=0, ge=0)


class Square(BaseModel):
    kind: Literal["square"] = "square"
    side: int = Field(default=1, gt=0, le=100)
    corners: tuple[Leaf, ...] = ()


Shape = Annotated[Circle | Square, Field(discriminator="kind")]


class Fitting(BaseState):
    text: str = ""
    number: int = 0
    texts: list[str] = Field(default_factory=list)
    table: dict[str, int] = Field(default_factory=dict)
    maybe: str | None = None
    choice: Literal["x", "y", 3] = "x"
    leaf: Leaf | None = None
    tree: Tree | None = None
    trees: dict[str, Tree] = Field(default_factory=dict)
    shapes: list[Shape] = Field(default_factory=list)
    shape: Shape | None = None
    row: tuple[Leaf, ...] = ()


SCHEMA = StateSchema.of(Fitting)

ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
texts = st.text(max_size=8)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3)


json_data = st.recursive(st.none() | st.booleans() | ints | texts, _containers, max_leaves=8)
leaves = st.builds(
    Leaf,
    name=texts,
    count=ints,
    flag=st.booleans(),
    note=st.none() | texts,
    kind=st.sampled_from(["a", "b"]),
)
trees = st.builds(
    Tree,
    label=texts,
    leaves=st.lists(leaves, max_size=3),
    by_name=st.dictionaries(texts, st.none() | leaves, max_size=3),
    extra=st.dictionaries(texts, json_data, max_size=3),
    either=st.none() | texts | st.lists(texts, max_size=3),
)
shapes = st.builds(Circle, radius=st.integers(0, 2**63 - 1)) | st.builds(
    Square, side=st.integers(1, 100), corners=st.lists(leaves, max_size=2).map(tuple)
)
values = st.fixed_dictionaries(
    {
        "shapes": st.lists(shapes, max_size=3),
        "shape": st.none() | shapes,
        "row": st.lists(leaves, max_size=3).map(tuple),
        "text": texts,
        "number": ints,
        "texts": st.lists(texts, max_size=4),
        "table": st.dictionaries(texts, ints, max_size=4),
        "maybe": st.none() | texts,
        "choice": st.sampled_from(["x", "y", 3]),
        "leaf": st.none() | leaves,
        "tree": st.none() | trees,
        "trees": st.dictionaries(texts, trees, max_size=2),
    }
)


def full_check(spec: FieldSpec, value: Any) -> Any:
    """Return ``spec.to_json(value)`` with the validate-back check, as before the rule."""
    kept = spec.reads_back, spec.exact_dump
    spec.reads_back = spec.exact_dump = None
    try:
        return spec.to_json(value)
    finally:
        spec.reads_back, spec.exact_dump = kept


def test_every_field_of_json_exact_types_is_in_the_rule():
    assert all(spec.reads_back is not None for spec in SCHEMA.fields.values())


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(values)
def test_a_skipped_check_is_one_that_would_have_passed(raw):
    for name, value in raw.items():
        spec = SCHEMA.fields[name]
        value = spec.validate(value, "test")
        assert spec.reads_back is not None
        assert spec.reads_back(value)
        # The full check passes, and both give the same JSON form, also when it is built
        # in Python, key for key in the same order...
        expected = full_check(spec, value)
        assert spec.to_json(value) == expected
        if spec.exact_dump is not None:
            built = spec.exact_dump(value)
            assert built == expected
            assert orjson.dumps(built) == orjson.dumps(expected)
        # ...which reads back equal.
        assert spec.from_json(spec.to_json(value)) == value


class Validated(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def _shout(cls, value: str) -> str:
        return value + "!"


class Private(BaseModel):
    name: str
    _cache: int = PrivateAttr(default=0)


class Excluded(BaseModel):
    name: str
    secret: str = Field(default="", exclude=True)


class Computed(BaseModel):
    name: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def size(self) -> int:
        return len(self.name)


class Serialized(BaseModel):
    name: str

    @field_serializer("name")
    def _upper(self, value: str) -> str:
        return value.upper()


class Aliased(BaseModel):
    name: str = Field(validation_alias="n", serialization_alias="name_out")


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class Floating(BaseModel):
    score: float


class Named(BaseModel):
    name: str = Field(min_length=1)  # a bound of another kind than an int's


class Totalled(BaseModel):
    """Its validator only fills in what its dump always holds, which it says."""

    __nodestep_keeps_dump__: ClassVar[bool] = True

    part: int = 0
    total: int = 0

    @model_validator(mode="before")
    @classmethod
    def _total(cls, data: Any) -> Any:
        if isinstance(data, dict) and "total" not in data:
            data = {**data, "total": data.get("part", 0)}
        return data


class Subtotalled(Totalled):
    """A validator of its own, which its parent's promise does not cover."""

    @field_validator("part")
    @classmethod
    def _doubled(cls, value: int) -> int:
        return value * 2


@pytest.mark.parametrize(
    "annotation",
    [
        float,
        list[float],
        Floating,
        Validated,
        Private,
        Excluded,
        Computed,
        Serialized,
        Aliased,
        Open,
        Annotated[str, Field(max_length=3)],
        int | bool,
        Leaf | Tree,
        tuple[str, int],
        Annotated[Circle | Square, Field(discriminator="kind", description="a shape")],
        Named,
        Subtotalled,
        dict[int, str],
        Literal[1.5],
    ],
)
def test_a_type_just_outside_the_rule_gets_the_full_check(annotation):
    assert read_back_check(annotation) is None
    assert exact_dumper(annotation) is None


class Outside(BaseState):
    validated: Validated | None = None
    private: Private | None = None
    excluded: Excluded | None = None
    score: float = 0.0
    scores: list[float] = Field(default_factory=list)


OUTSIDE = StateSchema.of(Outside)


def test_fields_outside_the_rule_have_no_skip():
    assert all(spec.reads_back is None for spec in OUTSIDE.fields.values())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("validated", Validated(name="a")),
        ("private", Private(name="a")),
        ("excluded", Excluded(name="a", secret="s")),
    ],
)
def test_a_value_outside_the_rule_still_gets_the_round_trip_error(field, value):
    if field == "private":
        value._cache = 5
    spec = OUTSIDE.fields[field]
    with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
        spec.to_json(value)


def test_a_nan_in_a_float_field_still_gets_its_error():
    spec = OUTSIDE.fields["scores"]
    with pytest.raises(StateStoreError, match="nan or infinity"):
        spec.to_json([1.0, float("nan")])


class SubLeaf(Leaf):
    more: str = "kept"


def test_a_subclass_instance_in_a_rule_field_gets_the_full_check_and_its_error():
    spec = SCHEMA.fields["leaf"]
    value = spec.validate(SubLeaf(name="a"), "test")
    assert type(value) is SubLeaf
    assert not spec.reads_back(value)  # type: ignore[misc]
    assert spec.exact_dump(value) is MISS  # type: ignore[misc]
    with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
        spec.to_json(value)


def test_a_literal_outside_its_values_gets_the_full_check_and_its_error():
    spec = SCHEMA.fields["leaf"]
    value = Leaf.model_construct(name="a", kind="zz")
    assert spec.exact_dump(value) is MISS  # type: ignore[misc]
    with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
        spec.to_json(value)


class Text(str):
    pass


@pytest.mark.parametrize(
    "fields",
    [{"name": Text("a")}, {"count": True}, {"flag": 1}, {"note": Text("n")}, {"note": 1}],
)
def test_a_model_field_of_another_type_than_declared_makes_the_dump_miss(fields):
    # A str, int, bool or ``str | None`` field of a model is checked inline, by its
    # value's exact type: a subclass (bool for int too) or another type takes the full path.
    value = Leaf.model_construct(**{"name": "a", **fields})
    assert SCHEMA.fields["leaf"].exact_dump(value) is MISS  # type: ignore[misc]
    assert SCHEMA.fields["leaf"].exact_dump(Leaf(name="a", note="n")) is not MISS  # type: ignore[misc]


@pytest.mark.parametrize("held", [(1, 2), 1.5, {1: "a"}, {"k": [b"x"]}])
def test_an_any_value_that_is_not_plain_json_gets_the_full_check(held):
    spec = SCHEMA.fields["tree"]
    value = Tree(label="t", extra={"k": held})
    assert not spec.reads_back(value)  # type: ignore[misc]
    assert spec.exact_dump(value) is MISS  # type: ignore[misc]
    if held == 1.5:
        assert spec.to_json(value) == full_check(spec, value)
    else:
        with pytest.raises(StateStoreError):
            spec.to_json(value)


def test_an_int_beyond_64_bits_in_a_model_still_gets_its_error():
    spec = SCHEMA.fields["leaf"]
    with pytest.raises(StateStoreError) as caught:
        spec.to_json(Leaf(name="a", count=2**64))
    assert str(caught.value) == (
        f"Field 'leaf' cannot be stored as JSON: the int {2**64} at ['count'] is beyond "
        f"64 bits. Keep integers within 64 bits (store bigger ones as strings)."
    )


def test_a_lone_surrogate_is_refused_naming_its_place_with_a_hint_about_text():
    spec = SCHEMA.fields["leaf"]
    with pytest.raises(StateStoreError) as caught:
        spec.to_json(Leaf(name="half \ud83d"))
    assert str(caught.value) == (
        "Field 'leaf' cannot be stored as JSON: the str at ['name'] holds the lone surrogate "
        "'\\ud83d' (half of a UTF-16 pair, such as a cut emoji), which UTF-8 cannot encode. "
        "Repair the text where it comes in, e.g. text.encode('utf-8', 'replace').decode() "
        "turns it into '?'."
    )
    assert "64 bits" not in str(caught.value)


def test_plain_containers_of_scalars_keep_pydantic_s_dump_and_skip_the_read_back():
    spec = SCHEMA.fields["texts"]
    assert spec.reads_back is not None
    assert spec.exact_dump is None


def test_any_data_nested_deeper_than_json_allows_takes_the_full_path():
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    spec = SCHEMA.fields["tree"]
    assert spec.exact_dump(Tree(label="t", extra={"k": deep})) is MISS  # type: ignore[misc]
    with pytest.raises(StateStoreError):
        spec.to_json(Tree(label="t", extra={"k": deep}))


class Checked(BaseModel):
    kind: Literal["checked"] = "checked"
    score: int = 0

    @field_validator("score")
    @classmethod
    def _positive(cls, value: int) -> int:
        return abs(value)


def test_a_tagged_union_member_outside_the_rule_takes_the_full_path_alone():
    dump = exact_dumper(list[Annotated[Circle | Checked, Field(discriminator="kind")]])
    assert dump is not None
    assert dump([Circle(radius=2)]) == [{"kind": "circle", "radius": 2}]
    assert dump([Circle(radius=2), Checked(score=3)]) is MISS


def test_a_tagged_value_of_another_class_or_tag_takes_the_full_path():
    dump = exact_dumper(Shape)
    assert dump is not None
    assert dump(Square(side=3)) == {"kind": "square", "side": 3, "corners": []}
    assert dump(Square.model_construct(kind="circle", side=3, corners=())) is MISS
    assert dump(Leaf(name="a")) is MISS


def test_an_int_outside_its_bounds_gets_the_full_check_and_its_error():
    spec = SCHEMA.fields["shape"]
    for bad in (Circle.model_construct(radius=-1), Square.model_construct(side=101, corners=())):
        assert spec.exact_dump is not None and spec.exact_dump(bad) is MISS
        assert spec.reads_back is not None and not spec.reads_back(bad)
        with pytest.raises(StateStoreError, match="does not survive a JSON round trip"):
            spec.to_json(bad)


def test_a_class_that_says_its_validators_keep_its_dump_is_in_the_rule():
    assert read_back_check(Totalled) is not None
    dump = exact_dumper(list[Totalled])
    value = [Totalled(part=2)]
    assert dump is not None and dump(value) == [{"part": 2, "total": 2}]
    back = [Totalled.model_validate(item) for item in dump(value)]
    assert back == value


def test_a_fields_own_dumper_counts_only_as_its_one_metadata():
    class Own:
        __nodestep_dump__ = staticmethod(lambda value: value)

    assert own_dumper([Own()]) is Own.__nodestep_dump__
    assert own_dumper([Own(), Field(max_length=3)]) is None
    assert own_dumper([]) is None


class Flagged(BaseModel):
    on: Literal[True] = True
    level: Literal[1, 2] = 1
    name: str = "f"


def test_a_literal_field_of_a_model_passes_its_values_of_their_own_types_only():
    dump = exact_dumper(list[Flagged])
    assert dump is not None
    assert dump([Flagged(level=2)]) == [{"on": True, "level": 2, "name": "f"}]
    assert dump([Flagged.model_construct(on=1)]) is MISS  # 1 == True, but not a bool
    assert dump([Flagged.model_construct(level=True)]) is MISS
    assert dump([Flagged.model_construct(level=3)]) is MISS


def test_a_model_without_one_of_its_fields_in_its_dict_makes_the_dump_miss():
    value = Flagged()
    del value.__dict__["level"]
    dump = exact_dumper(list[Flagged])
    assert dump is not None and dump([value]) is MISS


def test_an_int_bound_alone_or_with_others_is_checked_alike():
    one = within_bounds([annotated_types.Ge(0)])
    both = within_bounds([annotated_types.Ge(0), annotated_types.Lt(10)])
    assert one(0) and one(10**6) and not one(-1)
    assert both(0) and both(9) and not both(10) and not both(-1)


@settings(max_examples=50, deadline=None)
@given(values)
def test_writes_to_json_gives_each_fields_own_to_json_form(vals):
    # An update's stored form is each field's to_json form, whatever path each field takes.
    writes = [(k, v, k == "texts") for k, v in vals.items()]
    expected = {k: SCHEMA.fields[k].to_json(v) for k, v in vals.items()}
    assert SCHEMA.writes_to_json(writes) == (expected, ["texts"])


@pytest.mark.parametrize("order", [("leaf", "tree", "number"), ("number", "leaf", "tree")])
def test_of_several_writes_refused_the_first_one_s_error_is_raised(order):
    # Each is refused by to_json: "leaf" and "tree" after their exact forms (an int beyond
    # 64 bits, a tuple in an Any), "number" at once. The first in the writes' order says so.
    refused = {
        "leaf": Leaf(name="a", count=2**64),
        "tree": Tree(label="t", extra={"k": (1, 2**64)}),
        "number": 2**64,
    }
    writes = [(k, refused[k], False) for k in order]
    with pytest.raises(StateStoreError) as caught:
        SCHEMA.writes_to_json(writes)
    with pytest.raises(StateStoreError) as first:
        SCHEMA.fields[order[0]].to_json(refused[order[0]])
    assert str(caught.value) == str(first.value)
    assert f"'{order[0]}'" in str(caught.value)
