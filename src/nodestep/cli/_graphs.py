"""The commands about a graph itself: ``run``, ``draw``, ``validate`` and ``serve``."""

from __future__ import annotations

import importlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.table import Table

from nodestep import GraphConfigError, InMemoryStateStore, NodestepError, Resume
from nodestep.cli._common import (
    CommandError,
    Output,
    PlainConsole,
    common_options,
    open_url,
    run_async,
    shell,
    stdin_is_terminal,
    store_option,
    visible,
)
from nodestep.cli._events import short
from nodestep.cli._target import load_target, target_graph

__all__ = ["GRAPH_COMMANDS"]


def _json_input(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise click.BadParameter(
            f'{text!r} is not JSON ({e}); write e.g. \'{{"topic": "tea"}}\'', param_hint="--input"
        ) from None
    if not isinstance(value, dict):
        raise click.BadParameter(
            f"{text!r} is not a JSON object; the input gives fields by "
            f'name, e.g. \'{{"topic": "tea"}}\'',
            param_hint="--input",
        )
    return value


def _answer(text: str) -> Any:
    """An answer typed at the prompt: JSON when it parses, else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _dump(state: Any) -> dict[str, Any]:
    dumped = state.model_dump(mode="json") if hasattr(state, "model_dump") else dict(state)
    return dict(dumped)


async def _stream_once(
    graph: Any, value: Any, options: dict[str, Any], bar: Progress
) -> tuple[str, Any, dict[str, Any]]:
    """Run the graph once, printing each task and superstep as it ends.

    Returns:
        ``"final"`` or ``"interrupt"``, the state, and the pending interrupts.
    """
    step = bar.add_task("superstep 0", total=None)
    kind, state, pending = "final", None, {}
    done = -1  # the last superstep reported: "updates" come once per task of a step
    stream = graph.astream(value, stream_mode=["task_updates", "updates"], **options)
    async for event in stream:
        if event.mode == "task_updates":
            writes = ", ".join(f"{k}={short(v, 40)}" for k, v in (event.data or {}).items())
            bar.console.print(f"  task {event.task_id}: {writes or 'no writes'}")
        elif event.mode == "updates" and event.step != done:
            done = event.step
            bar.update(step, description=f"superstep {event.step + 1}")
            bar.console.print(f"superstep {event.step} done")
        elif event.mode in ("final", "interrupt"):
            kind, state = event.mode, event.data.state
            pending = dict(getattr(event.data, "interrupts", {}))
    bar.remove_task(step)
    return kind, state, pending


def _ask(pending: dict[str, Any], console: Console, thread: str) -> Resume:
    answers = {}
    for key, waiting in pending.items():
        console.print(f"{key} (node {waiting.node}) asks: {short(waiting.payload, 400)}")
        try:
            text = click.prompt(f"answer for {key} (JSON, or text)", err=True)
        except click.Abort:  # stdin ended (or ^C/^D): the pause is kept in the store
            click.echo(err=True)
            raise CommandError(
                f"no answer for {key}; thread {thread!r} stays paused: run it again with "
                f"--thread {shell(thread)} to answer"
            ) from None
        if not stdin_is_terminal():
            click.echo(text, err=True)  # a piped answer shows in the transcript, as typed
        answers[key] = _answer(text)
    return Resume(answers=answers)


async def _node_failure(
    graph: Any, thread: str, branch: str, store: Any, error: Exception
) -> CommandError | None:
    """The one line for a run that ``error`` failed in a node: which node, and what to do.

    Why: the node's own exception names neither the node nor the thread, nor that the
    failure is kept and a run with ``--thread`` tries it again. ``None`` when the stored
    thread does not stand at a failure of this error (it failed before it ran, say).
    """
    try:
        snapshot = await graph.get_state(thread, branch_id=branch, state_store=store)
    except NodestepError:
        return None
    if snapshot.failed_node is None or snapshot.error_type != type(error).__name__:
        return None
    message = visible(" ".join(str(snapshot.error_message).split()))  # cut at 2,000 chars
    again = (
        f"fix it, then run again with --thread {shell(thread)} to try the node again"
        if not isinstance(store, InMemoryStateStore)
        else "give --store to keep the failed thread and try it again"
    )
    return CommandError(
        f"node {snapshot.failed_node!r} failed: {snapshot.error_type}: {message}; {again}"
    )


async def _waiting(graph: Any, thread: str, branch: str, store: Any) -> dict[str, Any] | None:
    """The interrupts a stored thread waits for (none: it continues), ``None`` for no thread.

    Raises:
        CommandError: The thread's last run completed: a run without ``--input`` has
            nothing to continue (the engine's ResumeError would say "invoke(None)").
    """
    if not await graph.exists(thread, branch_id=branch, state_store=store):
        return None
    snapshot = await graph.get_state(thread, branch_id=branch, state_store=store)
    if snapshot.status == "idle" and not snapshot.next and not snapshot.interrupts:
        raise CommandError(
            f"thread {thread!r} has nothing to continue: its last run completed; "
            f"give --input with the fields of a new turn (--input '{{}}' for none)"
        )
    return dict(snapshot.interrupts)


async def _run_graph(
    target: str,
    value: Any,
    thread: str,
    branch: str,
    store_url: str | None,
    quiet: bool,
    debug: bool,
) -> tuple[str, Any]:
    """Run (or continue) the thread, asking for the answers each pause waits for."""
    graph = target_graph(load_target(target))
    store = open_url(store_url, memory_ok=True, create=True) if store_url else None
    options: dict[str, Any] = {
        "thread_id": thread,
        "branch_id": branch,
        "state_store": store or graph.state_store or InMemoryStateStore(),
    }
    # Plain: the lines print the graph's values, and "[/x]" in one is not a style.
    console = PlainConsole(stderr=True, highlight=False, quiet=quiet)
    # The spinner only where a person watches; the lines printed above it go everywhere.
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        console=console,
        disable=quiet or not console.is_terminal,
    )
    try:
        with progress:
            pending: dict[str, Any] = {}
            if value is None:
                waiting = await _waiting(graph, thread, branch, options["state_store"])
                if waiting is None:
                    value = {}  # a new thread with no --input starts from the defaults
                else:
                    pending = waiting  # a paused thread: answer it first
            if pending:
                options["resume"] = _ask(pending, console, thread)
            kind, state, pending = await _stream_once(graph, value, options, progress)
            while kind == "interrupt" and pending:
                options["resume"] = _ask(pending, console, thread)
                kind, state, pending = await _stream_once(graph, None, options, progress)
    except Exception as e:
        failed = (
            None if debug else await _node_failure(graph, thread, branch, options["state_store"], e)
        )
        if failed is None:
            raise
        raise failed from e
    finally:
        if store is not None:
            await store.aclose()
    return kind, state


@click.command("run")
@click.argument("target", metavar="MODULE:GRAPH")
@click.option("--input", "input_text", help="The input, as a JSON object of fields.")
@click.option("--thread", "thread_id", help="The thread (default: a new random id).")
@click.option("--branch", default="main", show_default=True, help="The branch to run on.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@store_option(required=False)
@common_options
def run(
    target: str,
    input_text: str | None,
    thread_id: str | None,
    branch: str,
    quiet: bool,
    store_url: str | None,
    as_json: bool,
    debug: bool,
) -> None:
    """Run a graph, showing each superstep and task; ask for answers when it pauses."""
    value = _json_input(input_text)
    if thread_id == "":
        # An unset shell variable (--thread "$T") must not start a new, random thread.
        raise click.BadParameter(
            "'' is empty; name the thread, or leave --thread out for a new one",
            param_hint="--thread",
        )
    thread = thread_id or uuid.uuid4().hex[:12]
    out = Output(as_json)

    async def work() -> tuple[str, Any]:
        return await _run_graph(target, value, thread, branch, store_url, quiet, debug)

    kind, state = run_async(debug, work)
    status = "completed" if kind == "final" else "stopped"
    if out.as_json:
        out.json({"thread_id": thread, "branch": branch, "status": status, "state": _dump(state)})
        return
    table = Table("field", "value", title=f"thread {thread}: {status}")
    for field, field_value in _dump(state).items():
        table.add_row(field, short(field_value, 200))
    out.print(table)


@click.command("draw")
@click.argument("target", metavar="MODULE:GRAPH")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["mermaid", "svg"]),
    default="mermaid",
    show_default=True,
    help="Mermaid text, or an SVG picture.",
)
@click.option(
    "-o",
    "--output",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write (default: stdout).",
)
@common_options
def draw(target: str, fmt: str, path: Path | None, as_json: bool, debug: bool) -> None:
    """Draw a graph as Mermaid text or SVG."""

    async def work() -> str:
        graph = target_graph(load_target(target))
        text = str(graph.to_mermaid()) if fmt == "mermaid" else graph.to_svg()
        if path is not None:
            # Here, inside run_async: a folder that does not exist is one line, not a traceback.
            try:
                path.write_text(text, encoding="utf-8")
            except OSError as e:
                raise CommandError(
                    f"cannot write {str(path)!r}: {e.strerror or e}; give -o a file in a "
                    f"folder that exists and may be written"
                ) from e
        return text

    text = run_async(debug, work)
    if as_json:
        Output(True).json(
            {"format": fmt, "file": str(path) if path else None, "drawing": None if path else text}
        )
    elif path is None:
        click.echo(text.rstrip("\n"))
    else:
        click.echo(f"wrote {fmt} to {path}", err=True)


@click.command("validate")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@common_options
def validate(path: Path, as_json: bool, debug: bool) -> None:
    """Check YAML graph manifests or a folder of agent specs; list every problem."""

    async def work() -> tuple[str, list[str]]:
        if path.is_file() and path.suffix not in (".yaml", ".yml"):
            # load_target would take it as a target and advise 'file.py:graph', a form
            # this command's PATH refuses.
            return "", [
                f"{path}: not a YAML manifest (*.yaml, *.yml); validate checks manifests, "
                f"or a folder of them or of agent specs. To check that a graph in Python "
                f"loads, draw it: nodestep draw {path}:NAME"
            ]
        try:
            loaded = load_target(str(path))
        except GraphConfigError as e:
            if debug:
                raise
            return "", list(e.problems)
        graph = target_graph(loaded)
        what = "agent" if graph is not loaded else "graph"
        return f"{what} {graph.name!r}", []

    found, problems = run_async(debug, work)
    if as_json:
        Output(True).json({"path": str(path), "ok": not problems, "problems": problems})
    elif problems:
        for problem in problems:
            click.echo(problem, err=True)
        click.echo(f"{path}: {len(problems)} problem(s)", err=True)
    else:
        click.echo(f"{path}: ok ({found})")
    if problems:
        raise SystemExit(1)


def _named(targets: tuple[str, ...]) -> dict[str, Any]:
    graphs: dict[str, Any] = {}
    for text in targets:
        name, eq, rest = text.partition("=")
        if not eq or ":" in name or "/" in name:
            name, rest = "", text
        target = load_target(rest)
        graph = target_graph(target)
        name = name or graph.name
        if name in graphs:
            raise click.UsageError(f"two graphs are named {name!r}; name one: 'other={rest}'")
        # An agent is served as itself: a chat client sends it messages, and the sandbox
        # shows its chat view.
        graphs[name] = target
    return graphs


def _module_paths(targets: tuple[str, ...], names: list[str]) -> dict[str, str]:
    """Return the import path of each graph given as ``MODULE:GRAPH``, by graph name.

    Workers (``serve --workers``) import each graph by it; a file path names no module.
    """
    paths: dict[str, str] = {}
    for name, text in zip(names, targets, strict=True):
        head, eq, rest = text.partition("=")
        target = rest if eq and ":" not in head and "/" not in head else text
        module = target.partition(":")[0]
        if "/" not in module and not module.endswith((".py", ".yaml", ".yml")):
            paths[name] = target
    return paths


@click.command("serve")
@click.argument("targets", metavar="[NAME=]MODULE:GRAPH...", nargs=-1, required=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=2024, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", "workers", metavar="URL", help="Run on workers: the queue's URL.")
@click.option(
    "--token",
    envvar="NODESTEP_API_TOKEN",
    help="The API's bearer token (default: $NODESTEP_API_TOKEN).",
)
@click.option("--cors-origin", "cors_origins", multiple=True, help="An allowed origin.")
@click.option("--memory", "memory_url", metavar="URL", help="The memory store's URL.")
@click.option("--ui", is_flag=True, help="Serve the sandbox web app at /ui too.")
@store_option(required=False)
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
def serve(
    targets: tuple[str, ...],
    host: str,
    port: int,
    workers: str | None,
    token: str | None,
    cors_origins: tuple[str, ...],
    memory_url: str | None,
    ui: bool,
    store_url: str | None,
    debug: bool,
) -> None:
    """Serve graphs over HTTP (needs `pip install 'nodestep[serve]'`)."""
    if ui:
        if workers is not None:
            raise click.UsageError(
                "--ui runs the graphs in the server process; leave --workers out"
            )
        _sandbox(targets, host, port, token, cors_origins, store_url, debug, memory_url)
        return
    try:
        # Imported by name, and only here: the server is an extra of its own.
        start = importlib.import_module("nodestep.serve").serve
    except ImportError as e:
        if debug:
            raise
        raise CommandError(_not_installed("server", "serve", e)) from e

    async def work() -> dict[str, Any]:
        return _named(targets)

    graphs = run_async(debug, work)
    with _refused_start(debug, host, port):
        start(
            graphs,
            graph_paths=_module_paths(targets, list(graphs)),
            store=store_url,
            host=host,
            port=port,
            workers=workers,
            token=token,
            cors_origins=list(cors_origins),
            memory=memory_url,
        )


@contextmanager
def _refused_start(debug: bool, host: str, port: int) -> Iterator[None]:
    """Turn a server's refusal to start (an open bind without a token, ``--workers``
    without a URL) into its one-line message and exit code 1; ``--debug`` raises it.

    uvicorn that cannot bind (the port is taken) logs why and exits with its own code 3,
    which is none of the command line's: that is exit code 1 too, with what to do.
    """
    try:
        yield
    except NodestepError as e:
        if debug:
            raise
        raise CommandError(str(e)) from e
    except SystemExit as e:
        if debug or e.code in (0, None):
            raise
        raise CommandError(
            f"the server did not start on {host}:{port} (the line above says why; a port "
            f"in use: choose another --port, or stop what listens there)"
        ) from None


def _not_installed(what: str, extra: str, error: ImportError) -> str:
    """Say that the ``extra`` is missing, with the import's error and the pip command once."""
    command = f"pip install 'nodestep[{extra}]'"
    # nodestep.serve and nodestep.sandbox raise an ImportError that already names the
    # command; any other import error (a module of the extra itself broken) gets it added.
    if command in str(error):
        return f"the {what} is not installed: {error}"
    return f"the {what} is not installed ({error}); {command}"


def _sandbox(
    targets: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    cors_origins: tuple[str, ...],
    store_url: str | None,
    debug: bool,
    memory_url: str | None = None,
) -> None:
    try:
        # Imported by name, and only here: the sandbox is an extra of its own.
        start = importlib.import_module("nodestep.sandbox").serve
    except ImportError as e:
        if debug:
            raise
        raise CommandError(_not_installed("sandbox", "sandbox", e)) from e

    async def work() -> dict[str, Any]:
        return _named(targets)

    graphs = run_async(debug, work)
    with _refused_start(debug, host, port):
        start(
            graphs,
            store=store_url,
            host=host,
            port=port,
            token=token,
            cors_origins=list(cors_origins),
            memory=memory_url,
        )


@click.command("sandbox")
@click.argument("targets", metavar="[NAME=]MODULE:GRAPH...", nargs=-1, required=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=2024, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="NODESTEP_API_TOKEN",
    help="The token for the API and the pages (default: $NODESTEP_API_TOKEN).",
)
@click.option("--cors-origin", "cors_origins", multiple=True, help="An allowed origin.")
@click.option("--memory", "memory_url", metavar="URL", help="The memory store's URL.")
@store_option(required=False)
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
def sandbox(
    targets: tuple[str, ...],
    host: str,
    port: int,
    token: str | None,
    cors_origins: tuple[str, ...],
    memory_url: str | None,
    store_url: str | None,
    debug: bool,
) -> None:
    """Serve graphs with the sandbox web app at /ui (needs `pip install 'nodestep[sandbox]'`)."""
    _sandbox(targets, host, port, token, cors_origins, store_url, debug, memory_url)


GRAPH_COMMANDS = [run, draw, validate, serve, sandbox]
