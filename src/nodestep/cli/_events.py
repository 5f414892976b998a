"""One line per history event: the node it belongs to and what it changed, for people.

``history`` prints these in its table; ``--json`` gives the records themselves instead, so
nothing here is a format a script should parse.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = ["describe", "short", "when"]

_WIDTH = 48  # the longest value shown whole in the table; the record itself has the rest


def when(ts: float) -> str:
    """Return a timestamp as UTC, to the second: the same on every machine."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(value: Any, width: int = _WIDTH) -> str:
    """Return a JSON value as compact text, cut to ``width`` characters with an ellipsis."""
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def _writes(update: Any) -> str:
    if not isinstance(update, dict) or not update:
        return "no writes"
    return ", ".join(f"{k}={short(v, 32)}" for k, v in update.items())


def describe(record: dict[str, Any]) -> tuple[str, str]:
    """Return the node (or nodes) of a stored record and a summary of what it changed."""
    kind = record.get("type")
    if kind == "subgraph":
        node, what = describe(record.get("record", {}))
        task = str(record.get("task", "?"))
        return (
            f"{task}/{node}" if node else task
        ), f"subgraph {record['record'].get('type')}: {what}"
    describer = _DESCRIBERS.get(str(kind))
    return describer(record) if describer else ("", "")


def _checkpoint(r: dict[str, Any]) -> tuple[str, str]:
    values = r.get("values", {})
    return "", f"{r.get('status', '?')} at step {r.get('step', '?')}; {len(values)} fields"


def _run_started(r: dict[str, Any]) -> tuple[str, str]:
    tasks = ", ".join(t if isinstance(t, str) else str(t.get("node")) for t in r.get("tasks", []))
    if "answers" in r:
        return "", "resume: " + ", ".join(f"{k}={short(v, 32)}" for k, v in r["answers"].items())
    if "input" in r:
        return tasks, "input " + _writes(r["input"])
    return tasks, "continue"


def _task_finished(r: dict[str, Any]) -> tuple[str, str]:
    node = str(r.get("node", ""))
    if "failed" in r:
        return node, f"failed, routed: {r['failed'].get('error')}"
    return node, _writes(r.get("update"))


def _superstep(r: dict[str, Any]) -> tuple[str, str]:
    tasks: dict[str, Any] = r.get("tasks", {})
    nodes = ", ".join(str(t.get("node", task)) for task, t in tasks.items())
    updates = {k: v for t in tasks.values() for k, v in (t.get("update") or {}).items()}
    what = f"step {r.get('step')}: " + (_writes(updates) if updates else "merged")
    return nodes, what


def _paused(r: dict[str, Any]) -> tuple[str, str]:
    pending = r.get("interrupts", [])
    nodes = ", ".join(sorted({str(i.get("node")) for i in pending}))
    return nodes, "paused: " + (", ".join(str(i.get("key")) for i in pending) or "breakpoint")


def _failed(r: dict[str, Any]) -> tuple[str, str]:
    message = str(r.get("message", ""))
    message = message if len(message) <= _WIDTH else message[: _WIDTH - 1] + "…"
    return str(r.get("node", "")), f"{r.get('error')}: {message}"


def _stopped(r: dict[str, Any]) -> tuple[str, str]:
    return ", ".join(r.get("nodes", [])), f"stopped: {r.get('reason')}"


def _completed(r: dict[str, Any]) -> tuple[str, str]:
    return "", f"completed at step {r.get('step')}"


def _updated(r: dict[str, Any]) -> tuple[str, str]:
    return str(r.get("node", "")), "update_state " + _writes(r.get("values"))


def _retried(r: dict[str, Any]) -> tuple[str, str]:
    return str(r.get("node", "")), f"attempt {r.get('attempt')} failed: {r.get('error')}"


def _breaker(r: dict[str, Any]) -> tuple[str, str]:
    return str(r.get("node", "")), f"circuit breaker {r.get('state')}"


_DESCRIBERS = {
    "checkpoint": _checkpoint,
    "run_started": _run_started,
    "task_finished": _task_finished,
    "superstep_completed": _superstep,
    "run_paused": _paused,
    "run_failed": _failed,
    "run_stopped": _stopped,
    "run_completed": _completed,
    "state_updated": _updated,
    "task_retried": _retried,
    "breaker_changed": _breaker,
}
