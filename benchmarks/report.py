"""Result rows and their rendering to markdown and JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness import Stats

HEAD = "head-to-head"
SCALING = "scaling"
STORAGE = "storage"


@dataclass(frozen=True)
class Target:
    op: str  # ">=" or "<="
    value: float

    def met(self, x: float | None) -> bool | None:
        if x is None:
            return None
        return x >= self.value if self.op == ">=" else x <= self.value

    def __str__(self) -> str:
        return f"{self.op} {self.value:g}"


@dataclass
class Row:
    section: str
    workload: str
    variant: str
    unit: str
    figures: dict[str, Stats | float | None]
    ratio: float | None = None
    ratio_of: str = ""
    target: Target | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> bool | None:
        return self.target.met(self.ratio) if self.target else None

    def as_dict(self) -> dict[str, Any]:
        figs: dict[str, Any] = {}
        for k, v in self.figures.items():
            figs[k] = v.as_dict() if isinstance(v, Stats) else v
        return {
            "section": self.section,
            "workload": self.workload,
            "variant": self.variant,
            "unit": self.unit,
            "figures": figs,
            "ratio": None if self.ratio is None else round(self.ratio, 3),
            "ratio_of": self.ratio_of,
            "target": str(self.target) if self.target else None,
            "target_met": self.met,
            "note": self.note,
            **({"extra": self.extra} if self.extra else {}),
        }


def median(x: Stats | float | None) -> float | None:
    if isinstance(x, Stats):
        return x.median_us
    return x


def ratio(num: Stats | float | None, den: Stats | float | None) -> float | None:
    a, b = median(num), median(den)
    if a is None or b is None or b == 0:
        return None
    return a / b


def _num(x: Stats | float | None) -> str:
    v = median(x)
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _ratio(x: float | None, suffix: str = "") -> str:
    return "–" if x is None else f"{x:.2f}{suffix}"


def _met(m: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "–"}[m]


def _section(
    rows: list[Row],
    section: str,
    head: list[str],
    line: Callable[[Row], str],
    *,
    with_workload: bool = True,
) -> list[str]:
    """Return one section's heading, table and row notes; nothing if it has no rows."""
    picked = [r for r in rows if r.section == section]
    if not picked:
        return []
    out = [*head, *(line(r) for r in picked)]
    notes = [
        f"- {f'{r.workload} ' if with_workload else ''}{r.variant}: {r.note}"
        for r in picked
        if r.note
    ]
    if notes:
        out += ["", *notes]
    out.append("")
    return out


def render_markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    out: list[str] = ["# nodestep vs LangGraph — benchmark results", ""]
    out.append(
        f"Mode: `{meta['mode']}`"
        + (f", workloads: {', '.join(meta['only'])}" if meta.get("only") else "")
        + f". Generated {meta['generated_utc']} in {meta['wall_seconds']:.1f} s."
    )
    out.append("")

    out += _section(
        rows,
        HEAD,
        [
            "## Head to head",
            "",
            "Median time per step in µs (lower is better). *Speed-up* = LangGraph / nodestep.",
            "",
            "| Workload | Variant | nodestep | LangGraph | Python floor | speed-up | target "
            "| met |",
            "|---|---|--:|--:|--:|--:|---|---|",
        ],
        lambda r: (
            f"| {r.workload} | {r.variant} | {_num(r.figures.get('nodestep'))} "
            f"| {_num(r.figures.get('langgraph'))} | {_num(r.figures.get('floor'))} "
            f"| {_ratio(r.ratio, 'x')} | {r.target or '–'} | {_met(r.met)} |"
        ),
    )
    out += _section(
        rows,
        SCALING,
        [
            "## Scaling with stored / carried data",
            "",
            "Median µs; *ratio* = large / small (1.0 means no growth).",
            "",
            "| Workload | Variant | small | large | ratio | target | met |",
            "|---|---|--:|--:|--:|---|---|",
        ],
        lambda r: (
            f"| {r.workload} | {r.variant} | {_num(r.figures.get('small'))} "
            f"| {_num(r.figures.get('large'))} | {_ratio(r.ratio)} "
            f"| {r.target or '–'} | {_met(r.met)} |"
        ),
    )
    out += _section(
        rows,
        STORAGE,
        [
            "## Storage",
            "",
            "| Workload | Store | bytes per step | target | met |",
            "|---|---|--:|---|---|",
        ],
        lambda r: (
            f"| {r.workload} | {r.variant} | {_ratio(r.ratio)} "
            f"| {r.target or '–'} | {_met(r.met)} |"
        ),
        with_workload=False,
    )

    if meta.get("durability"):
        out += ["## Durability settings of the store figures", ""]
        out += [f"- **{k}**: {v}" for k, v in meta["durability"].items()]
        out.append("")

    out += ["## Method", ""]
    out += [f"- {line}" for line in meta["method"]]
    out.append("")

    out += ["## Versions", "", "| package | version |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in meta["versions"].items()]
    out += ["", "## Machine", ""]
    out.append(
        "Load average (1, 5, 15 min) is recorded at start and end: other processes on "
        "this machine's cores widen the spread of every figure."
    )
    out.append("")
    out += [f"- {k}: {v}" for k, v in meta["machine"].items()]
    out.append("")
    if meta.get("errors"):
        out += ["## Errors", ""]
        out += [f"- {e}" for e in meta["errors"]]
        out.append("")
    return "\n".join(out)


def write(rows: list[Row], meta: dict[str, Any], outdir: str) -> tuple[str, str]:
    os.makedirs(outdir, exist_ok=True)
    md_path = os.path.join(outdir, "latest.md")
    json_path = os.path.join(outdir, "latest.json")
    doc = {"meta": meta, "results": [r.as_dict() for r in rows]}
    for path, text in (
        (json_path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n"),
        (md_path, render_markdown(rows, meta)),
    ):
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return md_path, json_path
