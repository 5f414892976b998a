"""LangGraph's idioms tried on a Graph: the usual error, naming the nodestep way."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodestep import END, START, BaseState, Graph, node


class Count(BaseState):
    n: int = 0


@node
def bump(state: Count) -> dict[str, Any]:
    return {"n": state.n + 1}


def graph() -> Graph[Count]:
    return Graph(Count).flow(START >> bump, bump >> END)


@pytest.mark.parametrize(
    ("name", "way"),
    [
        ("add_node", "a node is a function decorated with @node"),
        ("add_edge", "declare every edge in one flow() call: graph.flow(START >> a"),
        ("add_conditional_edges", "route in the flow with when() or branch()"),
        ("add_sequence", "graph.flow(START >> a >> b >> END)"),
        ("set_entry_point", "graph.flow(START >> first, ...)"),
        ("set_conditional_entry_point", "first >> branch(router, {...})"),
        ("set_finish_point", "graph.flow(..., last >> END)"),
        ("compile", "a graph runs once flow() has declared its edges"),
        ("get_graph", "graph.to_mermaid()"),
        ("astream_events", "async for event in graph.astream(input, stream_mode=["),
    ],
)
def test_a_langgraph_method_is_an_attribute_error_naming_the_nodestep_way(
    name: str, way: str
) -> None:
    g = graph()
    with pytest.raises(AttributeError) as caught:
        getattr(g, name)
    message = str(caught.value)
    assert message.startswith(f"'Graph' object has no attribute {name!r}; in nodestep, ")
    assert way in message
    assert "\n" not in message
    assert (caught.value.name, caught.value.obj) == (name, g)
    assert not hasattr(g, name)
    assert getattr(g, name, "default") == "default"


def test_another_missing_attribute_keeps_the_plain_message() -> None:
    with pytest.raises(AttributeError) as caught:
        graph().nodez  # type: ignore[attr-defined]  # noqa: B018
    assert str(caught.value) == "'Graph' object has no attribute 'nodez'"
    assert caught.value.name == "nodez"


def test_optional_hooks_a_graph_lacks_stay_missing_so_copy_works() -> None:
    # copy looks up optional hooks (__deepcopy__, __setstate__, ...) on the instance: each
    # must stay a plain AttributeError for the fallbacks to run.
    g = graph()
    assert not hasattr(g, "__deepcopy__")
    assert copy.copy(g).nodes == g.nodes


@pytest.mark.parametrize("method", ["invoke", "stream"])
def test_a_langgraph_config_dict_is_a_type_error_with_the_keywords_it_means(method: str) -> None:
    g = graph()
    config = {"configurable": {"thread_id": "t1", "user": "ada"}, "recursion_limit": 50}
    call = getattr(g, method)
    with pytest.raises(TypeError) as caught:
        if method == "stream":
            call({"n": 1}, stream_mode="values", config=config)
        else:
            call({"n": 1}, config=config)
    assert str(caught.value) == (
        f"{method}() got an unexpected keyword argument 'config': nodestep takes run options "
        f"as keywords, not LangGraph's config dict; here: {method}(input, thread_id='t1', "
        "context={'user': 'ada'}, max_steps=49)."
    )


def test_a_config_dict_without_a_thread_still_names_the_keywords() -> None:
    with pytest.raises(TypeError, match=r"here: invoke\(input, thread_id=\.\.\.\)\.$"):
        graph().invoke({"n": 1}, config={})


def test_a_config_that_is_not_a_dict_gets_the_usual_unknown_keyword_message() -> None:
    with pytest.raises(
        TypeError, match=r"^invoke\(\) got an unexpected keyword argument 'config'\. It takes: "
    ):
        graph().invoke({"n": 1}, config="t1")  # type: ignore[call-arg]


def test_the_keywords_the_message_names_run_the_graph() -> None:
    result = graph().invoke({"n": 1}, context={"user": "ada"})
    assert result.state.n == 2
