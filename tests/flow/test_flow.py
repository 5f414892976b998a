"""Flow building blocks: edges, when, branch, Command and Send, and their construction errors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from nodestep import END, START, Command, Send, branch, node, when
from nodestep._flow.edges import Edge
from nodestep._flow.routing import Branch, When


@node
def a(state):
    return None


@node
def b(state):
    return None


def is_ready(state) -> bool:
    return True


def test_rshift_makes_edges_between_nodes_and_terminals():
    edge = a >> b
    assert isinstance(edge, Edge)
    assert (edge.source, edge.target) == (a, b)
    assert (START >> a).source is START
    assert (b >> END).target is END
    assert repr(a >> b) == "a >> b"
    assert repr(START >> a) == "START >> a"
    assert repr(b >> END) == "b >> END"


def test_terminals_show_their_names():
    assert repr(START) == "START"
    assert repr(END) == "END"
    assert START is not END


def test_when_builds_a_two_way_route():
    route = when(is_ready, a, otherwise=END)
    assert isinstance(route, When)
    assert route.targets() == [a, END]
    assert repr(b >> route) == "b >> when(a, otherwise=END)"


def test_when_without_otherwise_is_a_type_error():
    with pytest.raises(TypeError, match=r"when\(predicate, target\) needs otherwise=\.\.\."):
        when(is_ready, a)


def test_when_with_a_predicate_that_is_not_callable_is_a_type_error():
    with pytest.raises(
        TypeError,
        match="when\\(\\) takes a callable predicate or a condition string first, got True",
    ):
        when(True, a, otherwise=b)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["a", None, START])
def test_when_targets_must_be_nodes_or_end(bad):
    with pytest.raises(TypeError, match="when\\(\\) targets must be nodes or END"):
        when(is_ready, bad, otherwise=END)
    with pytest.raises(TypeError, match="when\\(\\) targets must be nodes or END"):
        when(is_ready, a, otherwise=bad)


def test_branch_builds_a_many_way_route_with_its_own_mapping_copy():
    mapping = {"x": a, "y": END}
    route = branch(lambda s: "x", mapping)
    mapping["z"] = b
    assert isinstance(route, Branch)
    assert route.targets() == [a, END]
    assert repr(b >> route) == "b >> branch('x': a, 'y': END)"


def test_branch_with_a_router_that_is_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="branch\\(\\) takes a callable router first, got 'x'"):
        branch("x", {"x": a})  # type: ignore[arg-type]


@pytest.mark.parametrize("mapping", [{}, [("x", a)]])
def test_branch_needs_a_non_empty_dict(mapping):
    with pytest.raises(TypeError, match="needs a non-empty dict of key -> node or END"):
        branch(is_ready, mapping)  # type: ignore[arg-type]


def test_branch_targets_must_be_nodes_or_end():
    with pytest.raises(TypeError, match="branch\\(\\) targets must be nodes or END, got 'b'"):
        branch(is_ready, {"x": a, "y": "b"})


def test_send_takes_a_node_and_a_payload_dict():
    send = Send(a, {"count": 1})
    assert send.node_name == "a"
    assert send == Send(a, {"count": 1})
    assert send != Send(a, {"count": 2})
    assert repr(send) == "Send('a', {'count': 1})"


def test_send_takes_a_node_name_as_goto_does():
    send = Send("a", {"count": 1})
    assert send.node_name == "a" and send.node == "a"
    assert send == Send(a, {"count": 1})


@pytest.mark.parametrize("name", ["", "  ", "END", "START"])
def test_send_refuses_a_name_that_is_no_node(name):
    with pytest.raises(TypeError, match=r"names no node: a Send starts a task of a node"):
        Send(name)


def test_send_refuses_what_is_not_a_node():
    with pytest.raises(TypeError, match="takes a node made with @node or its name, got 3"):
        Send(3)  # type: ignore[arg-type]


def test_send_without_a_payload_has_an_empty_one():
    assert Send(a).payload == {}


def test_send_copies_its_payload():
    payload = {"count": 1}
    send = Send(a, payload)
    payload["count"] = 2
    assert send.payload == {"count": 1}


def test_send_with_a_model_payload_keeps_the_fields_that_were_set():
    class Part(BaseModel):
        count: int = 0
        note: str = ""

    assert Send(a, Part(note="x")).payload == {"note": "x"}


def test_send_with_a_payload_that_is_not_a_dict_is_a_type_error():
    with pytest.raises(TypeError, match="A Send payload is a dict of state fields, got list"):
        Send(a, [1, 2])  # type: ignore[arg-type]


def test_send_is_not_hashable():
    with pytest.raises(TypeError, match="unhashable type: 'Send'"):
        hash(Send(a))


def test_command_without_goto_follows_the_edges():
    command = Command(update={"count": 1})
    assert command.goto is None
    assert command.update == {"count": 1}


@pytest.mark.parametrize("target", [a, "a", END, Send(a)])
def test_command_with_one_target_holds_a_list_of_one(target):
    assert Command(goto=target).goto == [target]


def test_command_with_a_list_of_targets_keeps_their_order():
    send = Send(b, {"count": 1})
    assert Command(goto=(b, a, send, END)).goto == [b, a, send, END]


def test_command_with_an_empty_goto_routes_nowhere():
    assert Command(goto=[]).goto == []


def test_command_takes_keyword_arguments_only():
    with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
        Command({"count": 1})  # type: ignore[misc]


def test_command_with_a_model_instance_as_update_is_refused():
    class Part(BaseModel):
        count: int = 0

    with pytest.raises(
        TypeError,
        match=r"Command\(update=\.\.\.\) takes a dict of the fields to change, got a Part "
        r"instance\. Pass a dict, e\.g\. Command\(update=\{'field': value\}\); for a model, "
        r"update=model\.model_dump\(exclude_unset=True\)",
    ):
        Command(update=Part(count=1))  # type: ignore[arg-type]


def test_command_with_an_update_that_is_not_a_dict_is_refused():
    with pytest.raises(
        TypeError, match=r"Command\(update=\.\.\.\) takes a dict of the fields to change, got list"
    ):
        Command(update=[("count", 1)])  # type: ignore[arg-type]
