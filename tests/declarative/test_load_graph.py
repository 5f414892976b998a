"""YAML manifests: loading, running like a Python-built graph, writing back, and refusals."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from nodestep import (
    END,
    START,
    GraphConfigError,
    InMemoryStateStore,
    RetryPolicy,
    load_graph,
    manifest_json_schema,
    node,
    when,
)
from nodestep.testing import sequential_ids, ticking_clock

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "examples" / "support_desk" / "specs"


@pytest.fixture(autouse=True)
def _examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


def rules() -> dict[str, Any]:
    from support_desk.nodes import validate_transaction

    return {"business_rules.validate_transaction": validate_transaction}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_support_desk_manifests_route_each_scenario_as_a_reader_expects() -> None:
    from support_desk.nodes import Caller, User

    graph = load_graph(SPECS, functions=rules())
    cases = {
        ("ok", "free"): ["processed", "success"],
        ("payment", "free"): ["payment received", "validated by business rules"],
        ("slow", "free"): ["sent to a human"],
        ("vip", "enterprise"): ["escalation asked", "paged the on-call team"],
        ("vip", "free"): ["escalation asked", "backlog"],
    }
    for (scenario, tier), log in cases.items():
        extra = {"amount": 10.0} if scenario == "payment" else {}
        ctx = Caller(user=User(tier=tier))
        assert graph.invoke({"scenario": scenario, **extra}, context=ctx).state.log == log


def python_built_support_desk() -> Any:
    from support_desk import nodes as n

    from nodestep import Graph

    def update(name: str, values: dict[str, Any]) -> Any:
        def fn(state: Any) -> dict[str, Any]:
            return {k: list(v) if isinstance(v, list) else v for k, v in values.items()}

        return node(fn, name=name)

    process = node(n.process, name="Process", timeout=5)
    retry = node(n.retry, name="RetryHandler")
    success = update("SuccessHandler", {"log": ["success"]})
    validator = update(
        "CustomValidator", {"status": "validated", "log": ["validated by business rules"]}
    )
    error = update("ErrorHandler", {"status": "needs_human", "log": ["sent to a human"]})
    high = update("HighPriorityPath", {"priority": "high", "log": ["paged the on-call team"]})
    backlog = update("Backlog", {"log": ["backlog"]})
    c = {"context": n.Caller, "functions": rules()}
    route = when(
        "user.tier == 'enterprise' and (urgent == true or customer_complaint == true)",
        high,
        otherwise=backlog,
        **c,
    )
    route = when(
        "$is_error('UnauthorizedError') or $is_error('TimeoutError')", error, otherwise=route, **c
    )
    route = when("business_rules.validate_transaction", validator, otherwise=route, **c)
    route = when("failed and (retry_count < 3 or priority == 'high')", retry, otherwise=route, **c)
    route = when("status == 'complete'", success, otherwise=route, **c)
    graph = Graph(
        n.Ticket,
        name="support_desk",
        state_store=InMemoryStateStore(),
        id_factory=sequential_ids(),
        clock=ticking_clock(),
    )
    return graph.flow(
        START >> process,
        process >> route,
        retry >> process,
        *(h >> END for h in (success, validator, error, high, backlog)),
    )


@pytest.mark.parametrize("scenario", ["ok", "flaky", "locked", "vip"])
def test_a_loaded_graph_writes_the_same_history_as_the_same_graph_built_in_python(
    scenario: str,
) -> None:
    from support_desk.nodes import Caller, User

    store = InMemoryStateStore()
    ids, clock = sequential_ids(), ticking_clock()
    loaded = load_graph(SPECS, functions=rules(), state_store=store, id_factory=ids, clock=clock)
    built = python_built_support_desk()
    ctx = Caller(user=User(tier="enterprise"))
    histories = []
    for graph in (loaded, built):
        graph.invoke({"scenario": scenario}, thread_id="t", context=ctx)
        histories.append([(e.type, e.data) for e in graph.history_sync("t").events])
    assert histories[0] == histories[1]


def test_to_yaml_writes_a_manifest_that_loads_back_to_an_equal_graph(tmp_path: Path) -> None:
    graph = load_graph(SPECS, functions=rules())
    text = graph.to_yaml()
    again = load_graph(write(tmp_path, "g.yaml", text), functions=rules())
    assert again.to_yaml() == text
    assert list(again.nodes) == list(graph.nodes)
    assert yaml.safe_load(text)["nodestep"] == 1


def test_a_graph_built_in_python_with_conditions_writes_a_manifest(tmp_path: Path) -> None:
    from support_desk.nodes import Ticket, process

    from nodestep import Graph

    step = node(process)
    graph = Graph(Ticket, name="small").flow(
        START >> step, step >> when("status == 'complete'", END, otherwise=END)
    )
    data = yaml.safe_load(graph.to_yaml())
    assert data["nodes"] == [
        {
            "name": "process",
            "function": "support_desk.nodes:process",
            "edges": [{"target": "END", "when": "status == 'complete'"}, {"target": "END"}],
        }
    ]
    assert load_graph(write(tmp_path, "g.yaml", graph.to_yaml())).to_yaml() == graph.to_yaml()


def test_to_yaml_refuses_what_a_manifest_cannot_express() -> None:
    from support_desk.nodes import Ticket

    from nodestep import Graph

    @node
    def local(t: Ticket) -> None:
        return None

    graph = Graph(Ticket).flow(START >> local, local >> when(lambda s: True, END, otherwise=END))
    with pytest.raises(GraphConfigError) as caught:
        graph.to_yaml()
    text = "\n".join(caught.value.problems)
    assert "has no import path" in text and "has a Python predicate" in text


def test_to_yaml_names_a_fan_out_and_a_join_with_their_fix() -> None:
    from support_desk.nodes import Ticket

    from nodestep import Graph

    def step(name: str) -> Any:
        return node(lambda t: None, name=name)

    a, b, c, d = (step(n) for n in "abcd")
    graph = Graph(Ticket).flow(START >> a >> [b, c], [b, c] >> d, d >> END)
    with pytest.raises(GraphConfigError) as caught:
        graph.to_yaml()
    fan_out, join = (p for p in caught.value.problems if "import path" not in p)
    assert fan_out.startswith("Node 'a' fans out to b, c (a >> [b, c]), which a manifest cannot")
    assert "return Command(goto=[...]) and declare goto: [b, c]" in fan_out
    assert join.startswith("The join [b, c] >> d cannot be expressed in a manifest; give each")
    assert "'d' defer=True" in join
    assert not any("branch()" in p for p in caught.value.problems)


BROKEN = """\
nodestep: 1
kind: Graph
name: broken
state: support_desk.nodes:Ticket
start: Process
nodes:
  - name: Process
    function: support_desk.nodes:process
    timeout: -1
    retry: {attempts: 0}
    edges:
      - target: Nowhere
      - target: Process
        when: status == 3
  - name: Process
    function: support_desk.nodes:process
    edges: [{target: END}]
  - name: Odd
    type: teleport
    edges: [{target: END}]
  - name: Missing
    function: support_desk.nodes:no_such_function
    edges: [{target: END}]
  - name: Badly
    function: not a path
    edges: [{target: END, when: "status =="}]
"""


def test_every_manifest_problem_is_reported_at_once_with_file_line_and_column(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "broken.yaml", BROKEN)
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    problems = caught.value.problems
    expected = [
        (9, 14, "'timeout' takes a positive number of seconds"),
        (10, 12, "'retry' 'attempts' takes a whole number of at least 1, got 0"),
        (12, 17, "unknown target 'Nowhere'"),
        (13, 9, "comes after an edge without 'when'"),
        (14, 22, "compares a string with a number"),
        (15, 11, "a second node named 'Process' (the first is at"),
        (19, 11, "unknown node type 'teleport'"),
        (22, 15, "'support_desk.nodes' has no 'no_such_function'"),
        (25, 15, "must be an import path"),
        (26, 43, "expected a value"),
    ]
    for line, column, message in expected:
        assert any(p.startswith(f"{path}:{line}:{column}: ") and message in p for p in problems), (
            line,
            column,
            message,
            problems,
        )
    assert len(problems) == len(expected), problems


MIXED = """\
nodestep: 1
kind: Graph
name: mixed
state: support_desk.nodes:Ticket
start: both
nodes:
  - name: both
    function: support_desk.nodes:process
    update: {status: closed}
    edges: [{target: runs}]
  - name: runs
    type: function
    function: support_desk.nodes:process
    update: {status: closed}
    edges: [{target: returns}]
  - name: returns
    type: update
    function: support_desk.nodes:process
    update: {retry_count: seven, urgent: true, amount: 2, log: [ok]}
    edges: [{target: END}]
"""


def test_a_key_the_node_type_does_not_use_and_a_value_its_field_refuses_are_placed(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "mixed.yaml", MIXED)
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    problems = caught.value.problems
    expected = [
        (8, 15, "node 'both' has both 'function:' and 'update:', but a node runs one"),
        (14, 13, "node 'runs' of type function has 'update:', which only a node of type update"),
        (18, 15, "node 'returns' of type update has 'function:', which only a node of type"),
        (19, 27, "Field 'retry_count' got an invalid value from 'returns': Input should be a"),
    ]
    for line, column, message in expected:
        assert any(p.startswith(f"{path}:{line}:{column}: ") and message in p for p in problems), (
            line,
            column,
            message,
            problems,
        )
    assert len(problems) == len(expected), problems
    assert "Fix the value under 'update:'" in problems[-1]


def test_a_manifest_cannot_build_python_objects_with_tags(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = write(
        tmp_path,
        "evil.yaml",
        f"""\
        nodestep: 1
        kind: Graph
        name: !!python/object/apply:os.system ["touch {marker}"]
        state: support_desk.nodes:Ticket
        start: a
        """,
    )
    with pytest.raises(
        GraphConfigError,
        match=r"the tag 'tag:yaml\.org,2002:python/object/apply:os\.system' is not allowed",
    ):
        load_graph(path)
    assert not marker.exists()


def test_aliases_duplicate_keys_and_merge_keys_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tricks.yaml",
        """\
        nodestep: 1
        kind: Graph
        name: &n tricks
        name: again
        state: support_desk.nodes:Ticket
        start: *n
        nodes:
          - <<: {name: a}
        """,
    )
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    text = "\n".join(caught.value.problems)
    assert "the key 'name' is given twice" in text
    assert "aliases (*name) are not allowed" in text
    assert "merge keys (<<) are not allowed" in text


def test_allowed_packages_keeps_a_manifest_from_importing_other_code(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "g.yaml",
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: support_desk.nodes:Ticket
        start: a
        nodes:
          - {name: a, function: "os:getcwd", edges: [{target: END}]}
        """,
    )
    with pytest.raises(GraphConfigError, match="'os:getcwd' is outside the allowed packages"):
        load_graph(path, allowed_packages=["support_desk"])


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("kind: Graph", "this nodestep reads manifest version 1, and the document has no version"),
        ("nodestep: 2\nkind: Graph", "has version 2; start it with 'nodestep: 1'"),
        ("nodestep: 1\nkind: Graf", "unknown document kind 'Graf'"),
    ],
)
def test_the_manifest_version_and_kind_are_checked(
    tmp_path: Path, header: str, message: str
) -> None:
    path = write(tmp_path, "g.yaml", header + "\nname: g\n")
    with pytest.raises(GraphConfigError, match=message):
        load_graph(path)


def test_invalid_yaml_names_its_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", "nodestep: 1\nkind: [Graph\n")
    with pytest.raises(GraphConfigError, match=rf"{path}:3:1: this is not valid YAML"):
        load_graph(path)


def test_a_path_without_manifests_and_options_the_manifest_owns_are_refused(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match="No manifest"):
        load_graph(tmp_path)
    with pytest.raises(GraphConfigError, match="does not exist"):
        load_graph(tmp_path / "nope")
    with pytest.raises(GraphConfigError, match="load_graph\\(\\) got max_steps"):
        load_graph(SPECS, max_steps=3)


def test_functions_must_map_dotted_names_to_callables() -> None:
    with pytest.raises(GraphConfigError, match="functions= maps dotted names"):
        load_graph(SPECS, functions={"not dotted!": print})


@pytest.mark.slow
def test_the_example_manifests_satisfy_the_json_schema() -> None:
    schema = manifest_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for file in sorted(SPECS.glob("*.yaml")):
        for document in yaml.safe_load_all(file.read_text(encoding="utf-8")):
            jsonschema.validate(document, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nodestep": 1, "kind": "Node", "name": "x", "retry": {}}, schema)


def test_the_shipped_schema_file_is_the_schema_the_code_describes() -> None:
    shipped = json.loads((ROOT / "docs" / "manifest.schema.json").read_text(encoding="utf-8"))
    assert shipped == manifest_json_schema()


def test_flow_problems_are_placed_at_the_node_they_name(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "g.yaml",
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: support_desk.nodes:Ticket
        start: a
        nodes:
          - {name: a, function: "support_desk.nodes:process", edges: [{target: END}]}
          - {name: lonely, function: "support_desk.nodes:retry", edges: [{target: END}]}
        """,
    )
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    assert caught.value.problems == (
        f"{path}:8:12: Node 'lonely' is not reachable from START; route to it from a "
        f"reachable node (an edge, when/branch or a declared goto) or leave it out of the flow",
    )


def test_names_and_conditions_stay_text_where_yaml_would_read_booleans(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "g.yaml",
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: support_desk.nodes:Ticket
        start: yes
        nodes:
          - name: yes
            function: support_desk.nodes:process
            retry: {attempts: 2, on: [TimeoutError]}
            edges:
              - {target: no, when: true}
          - name: no
            type: update
            update: {urgent: yes, status: 'on'}
            edges: [{target: END}]
        """,
    )
    graph = load_graph(path)
    # The retry key 'on' is read as a key, and names the errors retried.
    assert graph.nodes["yes"].retry == RetryPolicy(attempts=2, retry_on=("TimeoutError",))
    result = graph.invoke({"scenario": "ok"})
    assert (result.state.urgent, result.state.status) == (True, "on")


def test_a_setting_whose_keyword_node_lacks_is_refused_as_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodestep._declarative import settings

    monkeypatch.setattr(settings, "_NODE_PARAMETERS", settings._NODE_PARAMETERS - {"roles"})
    path = write(
        tmp_path,
        "g.yaml",
        """\
        nodestep: 1
        kind: Graph
        name: g
        state: support_desk.nodes:Ticket
        start: a
        nodes:
          - name: a
            function: support_desk.nodes:process
            roles: [ticket-reader]
            edges: [{target: END}]
        """,
    )
    with pytest.raises(GraphConfigError) as caught:
        load_graph(path)
    assert caught.value.problems == (
        f"{path}:9:12: 'roles' is not available in this build of nodestep (node() has no "
        f"roles= keyword); remove it, or install a nodestep that has it",
    )


def test_manifests_without_any_document_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.yaml", "# nothing yet\n")
    with pytest.raises(GraphConfigError, match=rf"{path}:1:1: the manifests hold no document"):
        load_graph(path)
