"""Print the figures of the house: modules, import edges, depth, circles, per package.

    python scripts/house.py            # every package of src/nodestep
    python scripts/house.py store      # one package (a path under src/nodestep)

Every import counts (inside functions and under ``TYPE_CHECKING`` too), as in
``tests/test_house.py``. "Depth" is the longest chain of imports inside the package: a
module that imports nothing of the package is level 1.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((SRC / "nodestep").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        found.update(n for n in names if n in known and n != module)
    return found


def main(argv: list[str]) -> None:
    known = modules()
    graph = {m: imports(m, p, known) for m, p in known.items()}
    prefix = "nodestep." + argv[0].replace("/", ".").strip(".") if argv else "nodestep"
    inside = {m for m in known if m == prefix or m.startswith(prefix + ".")}
    edges = {(a, b) for a in inside for b in graph[a] if b in inside}

    @cache
    def level(m: str) -> int:
        # The imports form no circle (tests/test_house.py), so the longest chain is finite.
        return 1 + max((level(b) for b in graph[m] if b in inside), default=0)

    lines = sum(len(known[m].read_text(encoding="utf-8").splitlines()) for m in inside)
    print(
        f"{prefix}: {len(inside)} modules, {lines} lines, {len(edges)} import edges inside, "
        f"depth {max((level(m) for m in inside), default=0)}"
    )
    per: dict[str, int] = defaultdict(int)
    for m in inside:
        top = m.split(".")[1] if m.count(".") else "(face)"
        per[top] += 1
    print("  modules by package:", ", ".join(f"{k} {v}" for k, v in sorted(per.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
