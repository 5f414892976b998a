"""The lowest versions pyproject.toml allows have every API nodestep calls.

pip keeps an older pydantic or anyio that a project already pins, when it satisfies the
floor: a floor below what the code calls makes ``import nodestep`` fail, or hangs a run,
on such an install. Each row is an API the code uses and the release that added it (each
was found by installing the older releases and running the docs' examples).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

NEEDS = [
    # (distribution, the release that added it, what nodestep uses)
    ("pydantic", (2, 12), "model_dump(exclude_computed_fields=...), in the stored JSON form"),
    ("pydantic", (2, 11), "pydantic.ModelWrapValidatorHandler, in the messages"),
    ("anyio", (4, 16), "EventLoopToken.backend_class.run_sync_soon, in the engine's inbox"),
]


def _floors() -> dict[str, tuple[int, ...]]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    floors = {}
    for requirement in pyproject["project"]["dependencies"]:
        found = re.match(r"([A-Za-z0-9_.-]+)[^;]*?>=\s*([0-9][0-9.]*)", requirement)
        if found:
            floors[found[1].lower()] = tuple(int(p) for p in found[2].split("."))
    return floors


@pytest.mark.parametrize(("name", "release", "use"), NEEDS)
def test_the_dependency_floor_has_the_apis_nodestep_calls(
    name: str, release: tuple[int, ...], use: str
) -> None:
    floor = _floors()[name]
    assert floor >= release, (
        f"pyproject.toml allows {name} {'.'.join(map(str, floor))}, but nodestep uses {use}, "
        f"added in {'.'.join(map(str, release))}: raise the floor"
    )
