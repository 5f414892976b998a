"""A manifest's per-node settings: retry, circuit_breaker, roles and private_state.

Each builds the object the Python API takes, runs as it does there, is checked at its
file, line and column, and is written back by ``to_yaml`` to a manifest that loads to an
equal graph.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    CircuitBreaker,
    CredentialsProvider,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    RetryPolicy,
    load_graph,
    node,
)
from nodestep.testing import FakeTime

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "refund_desk" / "specs"


@pytest.fixture(autouse=True)
def _examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Fresh stand-in services for each test: the example's module keeps them per process."""
    from refund_desk import nodes

    monkeypatch.setattr(nodes, "orders", nodes.OrdersAPI(drops=2))
    monkeypatch.setattr(nodes, "payments", nodes.PaymentsAPI())
    return nodes


def write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def breaker_settings(breaker: CircuitBreaker | None) -> Any:
    if breaker is None:
        return None
    return (breaker.failures, breaker.window, breaker.cooldown, breaker.failure_on)


def settings_of(graph: Graph[Any]) -> dict[str, Any]:
    """What makes two graphs' nodes equal here: function, timeout and every setting."""
    return {
        name: (
            n.fn, n.timeout, n.retry, breaker_settings(n.breaker), n.roles, n.private_state,
            n.defer, n.cache,
        )
        for name, n in graph.nodes.items()
        if not hasattr(n.fn, "manifest_update")
    }  # fmt: skip


def by_order(state: Any) -> Any:
    """A cache key function with an import path: a manifest names it."""
    return state.order_id


class Chat(BaseState):
    message: str = ""


class Memory(BaseModel):
    messages: list[str] = []


class OtherMemory(BaseModel):
    notes: list[str] = []


@node(private_state=Memory)
def assistant(state: Chat, *, memory: Memory) -> dict[str, Any]:
    """A node made in Python with private state; a manifest names it by import path."""
    memory.messages.append(state.message)
    return {}


def test_the_four_settings_load_to_the_objects_the_python_api_takes(services: Any) -> None:
    graph = load_graph(AGENT)
    lookup, refund, greet = (graph.nodes[n] for n in ("lookup_order", "refund_payment", "greet"))
    assert lookup.retry == RetryPolicy(
        attempts=4, backoff=0.5, multiplier=2, jitter=0, retry_on="ConnectionError"
    )
    assert refund.retry == RetryPolicy(attempts=3, backoff=1, jitter=0)
    assert isinstance(refund.breaker, CircuitBreaker)
    assert breaker_settings(refund.breaker) == (2, 60.0, 300.0, Exception)
    assert refund.roles == ("payments",)
    assert greet.private_state is services.CustomerNotes
    assert (greet.retry, greet.breaker, greet.roles) == (None, None, ())


def run_turn(store: Any, message: str, *, payments_up: bool, services: Any) -> Any:
    services.payments.up = payments_up
    fake = FakeTime()
    graph = load_graph(AGENT, state_store=store, clock=fake, sleep=fake.sleep)
    result = graph.invoke(
        {"customer": "Ada", "message": message, "order_id": "A-1002"},
        thread_id="t",
        credentials=CredentialsProvider({"payments": "sk-test"}),
    )
    return graph, result, fake


def test_a_loaded_agent_retries_opens_its_breaker_and_routes_the_failure(services: Any) -> None:
    store = InMemoryStateStore()
    graph, result, fake = run_turn(store, "refund please", payments_up=False, services=services)
    assert (result.state.status, result.state.log[-1]) == ("queued", "refund queued")
    events = graph.history_sync("t").events
    retried = [(e.data["node"], e.data["attempt"]) for e in events if e.type == "task_retried"]
    # The second failure of refund_payment opened its breaker: no third attempt.
    assert retried == [("lookup_order", 1), ("lookup_order", 2), ("refund_payment", 1)]
    assert [e.data["state"] for e in events if e.type == "breaker_changed"] == ["open"]
    assert graph.nodes["refund_payment"].breaker.state == "open"
    routed = [
        task
        for e in events
        if e.type == "superstep_completed"
        for task in e.data["tasks"].values()
        if "failed" in task
    ]
    assert [(t["failed"]["error"], t["routes"]) for t in routed] == [
        ("CircuitOpenError", ["queue_refund"])
    ]
    assert fake.sleeps == [0.5, 1.0, 1.0]
    assert services.payments.calls == 2


def test_roles_and_credentials_reach_the_node_and_private_state_is_read_back(
    services: Any, tmp_path: Path
) -> None:
    store = FilesystemStateStore(tmp_path / "agent.jsonl")
    run_turn(store, "first", payments_up=False, services=services)
    graph, result, _ = run_turn(store, "second", payments_up=True, services=services)
    # The token of the 'payments' role reached ctx.credentials: its length is in the reply.
    assert result.state.reply == "refund of 15.50 for A-1002 sent (token of 7 chars)"
    notes = graph.node_state_sync("t", "greet")
    assert notes == services.CustomerNotes(name="Ada", requests=["first", "second"])
    assert "sk-test" not in (tmp_path / "agent.jsonl").read_text(encoding="utf-8")


def test_a_node_without_the_role_in_its_manifest_gets_no_credentials(
    services: Any, tmp_path: Path
) -> None:
    from nodestep import CredentialsError

    text = (AGENT / "agent.yaml").read_text(encoding="utf-8").replace("roles: [payments]", "")
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "agent.yaml").write_text(text, encoding="utf-8")
    (specs / "handlers.yaml").write_text(
        (AGENT / "handlers.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    graph = load_graph(specs, clock=FakeTime(), sleep=FakeTime().sleep)
    services.payments.up = True
    with pytest.raises(CredentialsError, match="role 'payments', which it does not declare"):
        graph.invoke(
            {"order_id": "A-1002"}, credentials=CredentialsProvider({"payments": "sk-test"})
        )


BAD = """\
nodestep: 1
kind: Graph
name: bad
state: refund_desk.nodes:Refund
start: a
nodes:
  - name: a
    function: refund_desk.nodes:lookup_order
    retry: {attempts: 2, jitter: 2, on: [refund_desk.nodes:Refund]}
    circuit_breaker: {failures: 2, window: 0}
    roles: [payments, ""]
    private_state: refund_desk.nodes:NoSuchNotes
    edges: [{target: b}]
  - name: b
    function: refund_desk.nodes:greet
    private_state: os.path:join
    retry: {attempts: 1, on: [no_such_module:Error], seed: x}
    edges: [{target: END}]
"""


def test_bad_settings_are_each_reported_at_their_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, BAD)
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    expected = [
        (9, 42, "'refund_desk.nodes:Refund' is not an exception class"),
        (10, 44, "'circuit_breaker': CircuitBreaker(window=...) takes a finite number of "
                 "seconds, more than 0; got 0"),
        (11, 12, "'roles' takes a non-empty list of role names"),
        (12, 20, "'refund_desk.nodes' has no 'NoSuchNotes'"),
        (16, 20, "private state class 'os.path:join' is not a pydantic model class"),
        (17, 12, "'retry' 'seed' takes a whole number, got 'x'"),
    ]  # fmt: skip
    check(caught.value.problems, path, expected)
    # With the other problems fixed, the policy that cannot work is found too, at its key.
    fixed = BAD.replace(", on: [refund_desk.nodes:Refund]", "").replace("window: 0", "window: 1")
    with pytest.raises(GraphConfigError) as caught:
        load_graph(write(tmp_path, fixed), allowed_packages=["refund_desk"])
    check(
        caught.value.problems,
        path,
        [
            (9, 34, "'retry': RetryPolicy(jitter=...) takes a fraction from 0 to 1; got 2"),
            (11, 12, "'roles' takes a non-empty list"),
            (12, 20, "has no 'NoSuchNotes'"),
            (16, 20, "'os.path:join' is outside the allowed packages (refund_desk)"),
            (17, 12, "'seed' takes a whole number"),
        ],
    )


def check(problems: tuple[str, ...], path: Path, expected: list[tuple[int, int, str]]) -> None:
    for line, column, message in expected:
        assert any(p.startswith(f"{path}:{line}:{column}: ") and message in p for p in problems), (
            line,
            column,
            message,
            problems,
        )
    assert len(problems) == len(expected), problems


def test_defer_and_cache_load_to_the_node_options_and_bad_ones_are_placed(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: refund_desk.nodes:Refund
        start: a
        nodes:
          - name: a
            function: refund_desk.nodes:lookup_order
            defer: true
            cache: {ttl: 60, key: test_manifest_settings:by_order}
            edges: [{target: b}]
          - name: b
            function: refund_desk.nodes:greet
            cache: {}
            edges: [{target: END}]
        """,
    )
    graph = load_graph(path)
    a, b = graph.nodes["a"], graph.nodes["b"]
    assert (a.defer, a.cache) == (True, CachePolicy(key=by_order, ttl=60.0))
    assert (b.defer, b.cache) == (False, CachePolicy())
    bad = path.read_text().replace("defer: true", "defer: yes please")
    bad = bad.replace("ttl: 60,", "ttl: 0,").replace("cache: {}", "cache: {key: os:getcwd}")
    with pytest.raises(GraphConfigError) as caught:
        load_graph(write(tmp_path, bad), allowed_packages=["refund_desk"])
    check(
        caught.value.problems,
        path,
        [
            (9, 12, "'defer' takes true or false, got 'yes please'"),
            (10, 12, "'cache' 'ttl' takes a positive number of seconds, got 0"),
            (14, 18, "'os:getcwd' is outside the allowed packages (refund_desk)"),
        ],
    )


def test_to_yaml_writes_defer_and_cache_so_the_graph_runs_the_same(tmp_path: Path) -> None:
    from refund_desk import nodes

    lookup = node(nodes.lookup_order, defer=True, cache=CachePolicy(key=by_order, ttl=5))
    greet = node(nodes.greet, cache=CachePolicy())
    graph = Graph(nodes.Refund).flow(START >> greet, greet >> lookup, lookup >> END)
    text = graph.to_yaml()
    written = {n["name"]: n for n in yaml.safe_load(text)["nodes"]}
    assert written["lookup_order"]["defer"] is True
    assert written["lookup_order"]["cache"] == {
        "ttl": 5.0,
        "key": "test_manifest_settings:by_order",
    }
    assert written["greet"]["cache"] == {} and "defer" not in written["greet"]
    again = load_graph(write(tmp_path, text))
    assert settings_of(again) == settings_of(graph)
    assert again.to_yaml() == text


def test_to_yaml_refuses_a_cache_key_without_an_import_path() -> None:
    from refund_desk import nodes

    lookup = node(nodes.lookup_order, cache=CachePolicy(key=lambda state: state.order_id))
    with pytest.raises(GraphConfigError) as caught:
        Graph(nodes.Refund).flow(START >> lookup, lookup >> END).to_yaml()
    (problem,) = caught.value.problems
    assert problem.startswith("The cache key function of node 'lookup_order' has no import path")


def test_an_unimportable_error_class_in_on_is_reported_where_it_is_written(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: refund_desk.nodes:Refund
        start: a
        nodes:
          - name: a
            function: refund_desk.nodes:lookup_order
            circuit_breaker: {failures: 1, on: no_such_module:Error}
            edges: [{target: END}]
        """,
    )
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:9:40: the exception class 'no_such_module:Error': ")
    assert "importing 'no_such_module' failed" in problem


def test_a_builtin_error_class_is_allowed_whatever_the_allowed_packages(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: refund_desk.nodes:Refund
        start: a
        nodes:
          - name: a
            function: refund_desk.nodes:lookup_order
            retry: {attempts: 2, on: ["builtins:ConnectionError", TimeoutError]}
            edges: [{target: END}]
        """,
    )
    graph = load_graph(path, allowed_packages=["refund_desk"])
    assert graph.nodes["a"].retry.retry_on == (ConnectionError, "TimeoutError")


def python_agent() -> Graph[Any]:
    from refund_desk import nodes
    from support_desk.nodes import UnauthorizedError

    greet = node(nodes.greet, private_state=nodes.CustomerNotes)
    lookup = node(
        nodes.lookup_order,
        timeout=5,
        retry=RetryPolicy(attempts=5, deadline=20, seed=7, retry_on=ConnectionError),
    )
    refund = node(
        nodes.refund_payment,
        roles=["payments", "audit"],
        retry=RetryPolicy(retry_on=(UnauthorizedError, "RateLimited")),
        breaker=CircuitBreaker(failures=3, window=10, cooldown=5, failure_on="TimeoutError"),
    )
    return Graph(nodes.Refund, name="agent").flow(
        START >> greet, greet >> lookup, lookup >> refund, refund >> END
    )


def test_to_yaml_writes_the_settings_so_the_graph_loads_back_equal(tmp_path: Path) -> None:
    graph = python_agent()
    text = graph.to_yaml()
    nodes = {n["name"]: n for n in yaml.safe_load(text)["nodes"]}
    assert nodes["greet"]["private_state"] == "refund_desk.nodes:CustomerNotes"
    assert nodes["lookup_order"]["retry"] == {
        "attempts": 5, "backoff": 0.5, "multiplier": 2.0, "max_backoff": 30.0, "jitter": 0.1,
        "deadline": 20, "seed": 7, "on": "builtins:ConnectionError",
    }  # fmt: skip
    assert nodes["refund_payment"]["retry"]["on"] == [
        "support_desk.nodes:UnauthorizedError",
        "RateLimited",
    ]
    assert nodes["refund_payment"]["circuit_breaker"] == {
        "failures": 3, "window": 10.0, "cooldown": 5.0, "on": "TimeoutError",
    }  # fmt: skip
    assert nodes["refund_payment"]["roles"] == ["audit", "payments"]
    again = load_graph(write(tmp_path, text))
    assert settings_of(again) == settings_of(graph)
    assert again.to_yaml() == text


def test_the_example_agent_round_trips_through_to_yaml(tmp_path: Path) -> None:
    graph = load_graph(AGENT)
    again = load_graph(write(tmp_path, graph.to_yaml()))
    assert settings_of(again) == settings_of(graph)
    assert again.to_yaml() == graph.to_yaml()


def test_to_yaml_refuses_error_matches_a_manifest_cannot_name() -> None:
    from refund_desk import nodes

    class LocalError(Exception):
        pass

    lookup = node(nodes.lookup_order, retry=RetryPolicy(retry_on=lambda e: "503" in str(e)))
    refund = node(nodes.refund_payment, breaker=CircuitBreaker(failure_on=(LocalError,)))
    graph = Graph(nodes.Refund).flow(START >> lookup, lookup >> refund, refund >> END)
    with pytest.raises(GraphConfigError) as caught:
        graph.to_yaml()
    first, second = caught.value.problems
    assert first.startswith("Node 'lookup_order' has retry_on=")
    assert "a function, which a manifest cannot express; give exception classes" in first
    assert second.startswith(
        "Node 'refund_payment' has a breaker with failure_on=LocalError, whose class has no "
        "import path"
    )


numbers = st.integers(0, 100) | st.floats(0, 100, allow_nan=False).map(lambda x: round(x, 3))
caches = st.builds(
    CachePolicy, key=st.sampled_from([None, by_order]), ttl=st.none() | numbers.filter(bool)
)
matches = st.sampled_from(
    [Exception, ConnectionError, "RateLimited", (TimeoutError, "Flaky"), ("A", "B")]
)


@settings(max_examples=40, deadline=None)
@given(
    attempts=st.integers(1, 9),
    backoff=numbers,
    multiplier=st.integers(1, 4) | st.floats(1, 4).map(lambda x: round(x, 2)),
    jitter=st.sampled_from([0, 0.1, 0.25, 1]),
    deadline=st.none() | st.integers(1, 60),
    seed=st.integers(-5, 5),
    retry_on=matches,
    failures=st.integers(1, 9),
    window=st.integers(1, 100),
    failure_on=matches,
    defer=st.booleans(),
    cache=st.none() | caches,
)
def test_any_policy_and_breaker_round_trip_through_a_manifest(
    tmp_path_factory: pytest.TempPathFactory, failures: int, window: int, failure_on: Any,
    defer: bool, cache: CachePolicy | None, **policy: Any,
) -> None:  # fmt: skip
    from refund_desk import nodes

    step = node(
        nodes.lookup_order,
        retry=RetryPolicy(**policy),
        breaker=CircuitBreaker(failures=failures, window=window, failure_on=failure_on),
        defer=defer,
        cache=cache,
    )
    graph = Graph(nodes.Refund).flow(START >> step, step >> END)
    path = write(tmp_path_factory.mktemp("m"), graph.to_yaml())
    assert settings_of(load_graph(path)) == settings_of(graph)


@pytest.mark.slow
def test_the_agent_manifests_and_what_to_yaml_writes_satisfy_the_json_schema() -> None:
    import jsonschema

    from nodestep import manifest_json_schema

    schema = manifest_json_schema()
    documents = [
        document
        for file in sorted(AGENT.glob("*.yaml"))
        for document in yaml.safe_load_all(file.read_text(encoding="utf-8"))
    ]
    documents.append(yaml.safe_load(python_agent().to_yaml()))
    for document in documents:
        jsonschema.validate(yaml_1_2_keys(document), schema)
    bad = {"nodestep": 1, "kind": "Node", "name": "x", "retry": {"attempts": 1, "on": []}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def yaml_1_2_keys(value: Any) -> Any:
    """Undo PyYAML's YAML 1.1 reading of an unquoted key ``on`` as ``True``.

    nodestep's loader and YAML 1.2 tools (the editors' language server) read it as the
    text ``on``; ``to_yaml`` quotes it, so PyYAML reads its output right as it is.
    """
    if isinstance(value, dict):
        return {("on" if k is True else k): yaml_1_2_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [yaml_1_2_keys(v) for v in value]
    return value


def test_to_yaml_of_a_node_made_with_private_state_loads_back_equal(tmp_path: Path) -> None:
    graph = Graph(Chat, name="chat").flow(START >> assistant, assistant >> END)
    text = graph.to_yaml()
    assert "private_state: test_manifest_settings:Memory" in text
    again = load_graph(write(tmp_path, text))
    assert settings_of(again) == settings_of(graph)
    assert again.to_yaml() == text


def test_a_manifest_giving_a_node_another_private_state_than_its_own_is_refused(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        """\
        nodestep: 1
        kind: Graph
        name: chat
        state: test_manifest_settings:Chat
        start: assistant
        nodes:
          - name: assistant
            function: test_manifest_settings:assistant
            private_state: test_manifest_settings:OtherMemory
            edges: [{target: END}]
        """,
    )
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    check(
        caught.value.problems,
        path,
        [(9, 20, "node 'assistant' already keeps a private state (Memory), not OtherMemory")],
    )


def test_a_role_name_node_refuses_is_reported_at_roles(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: refund_desk.nodes:Refund
        start: a
        nodes:
          - name: a
            function: refund_desk.nodes:lookup_order
            roles: [payments, 'bad role!']
            edges: [{target: END}]
        """,
    )
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    check(
        caught.value.problems,
        path,
        [
            (
                9,
                12,
                "'roles' has 'bad role!', which is not a role name: a role is a name of letters, "
                "digits and _ . : / -, starting with a letter or digit, e.g. 'billing'.",
            )
        ],
    )
