"""Random manifests never crash the loader: it builds a graph or raises GraphConfigError."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import GraphConfigError, load_graph

ROOT = Path(__file__).resolve().parents[2]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True),
    st.sampled_from(
        ["END", "a", "b", "status == 'x'", "nope <", "support_desk.nodes:process",
         "support_desk.nodes:Ticket", "os:getcwd", "function", "update", "teleport", ""]
    ),
)  # fmt: skip
KEYS = ["nodestep", "kind", "name", "state", "start", "nodes", "function", "type", "update"]
KEYS += ["edges", "target", "when", "timeout", "retry", "goto", "roles", "context", "max_steps"]
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=15,
)
header = st.fixed_dictionaries(
    {"nodestep": st.sampled_from([1, 1, 2]), "kind": st.sampled_from(["Graph", "Node", "X"])},
    optional={k: values for k in KEYS if k not in ("nodestep", "kind")},
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(documents=st.lists(header, min_size=1, max_size=3))
def test_random_manifests_load_or_raise_the_documented_error(
    documents: list[dict[str, Any]],
) -> None:
    with examples_on_path(), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.yaml"
        path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
        try:
            load_graph(path, allowed_packages=["support_desk"])
        except GraphConfigError as error:
            assert error.problems


@contextlib.contextmanager
def examples_on_path() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT / "examples"))
        yield
