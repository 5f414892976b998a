"""@node: which callables make nodes, their parameters, and the NodeContext they get."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    ContextNotProvidedError,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Node,
    NodeContext,
    NodestepError,
    node,
)


class S(BaseState):
    count: int = 0
    note: str = ""


def _run(n: Node, **kwargs: Any) -> Any:
    return Graph(S, name="g").flow(START >> n, n >> END).invoke({}, **kwargs)


# -- forms --------------------------------------------------------------------------------


def test_bare_decorator_makes_a_node_named_after_the_function():
    @node
    def tally(state):
        return None

    assert isinstance(tally, Node)
    assert tally.name == "tally"
    assert tally.goto == ()
    assert tally.timeout is None
    assert tally.is_async is False


def test_decorator_with_options_sets_name_goto_and_timeout():
    @node(name="counter", goto=["other", END], timeout=2)
    async def tally(state):
        return None

    assert tally.name == "counter"
    assert tally.goto == ("other", END)
    assert tally.timeout == 2.0
    assert isinstance(tally.timeout, float)
    assert tally.is_async is True


@node
def elsewhere(state):
    return None


@pytest.mark.parametrize(
    ("goto", "shown"),
    [("elsewhere", r"\['elsewhere'\]"), (elsewhere, r"\[elsewhere\]"), (END, r"\[END\]")],
    ids=["name", "node", "END"],
)
def test_a_single_goto_target_instead_of_a_list_is_refused(goto, shown):
    with pytest.raises(
        GraphConfigError,
        match=rf"Node 'a' got goto=.*; goto= takes a list of targets, even for one: "
        rf"@node\(goto={shown}\)",
    ):

        @node(goto=goto)
        def a(state):
            return None


@pytest.mark.parametrize("goto", [[], ()])
def test_an_empty_goto_list_is_refused(goto):
    with pytest.raises(
        GraphConfigError, match=r"Node 'a' got goto=.*, which declares no target; leave goto= out"
    ):
        node(lambda state: None, name="a", goto=goto)


@pytest.mark.parametrize(
    ("target", "what"),
    [
        (42, "the goto target 42, which is not a node"),
        (START, "the goto target START, which is not a node"),
        (None, "the goto target None, which is not a node"),
    ],
)
def test_a_goto_target_that_is_not_a_node_name_or_end_is_refused(target, what):
    with pytest.raises(
        GraphConfigError,
        match=rf"Node 'a' declares {what}\. goto= takes nodes, node names \(a node defined "
        rf"later, or the node itself\) and END\.",
    ):
        node(lambda state: None, name="a", goto=[elsewhere, target])


def test_a_plain_function_as_goto_target_says_to_decorate_it():
    def helper(state):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'a' declares a goto target that uses the plain function 'helper'; "
        r"decorate it with @node",
    ):
        node(lambda state: None, name="a", goto=[helper])


def test_goto_left_out_declares_nothing():
    assert node(lambda state: None, name="a").goto == ()


def test_node_called_on_a_function_with_a_name():
    def helper(state):
        return {"count": 1}

    made = node(helper, name="n1")
    assert made.name == "n1"
    assert made.fn is helper


def test_calling_a_node_calls_the_function():
    @node
    def double(state):
        return state * 2

    assert double(21) == 42


def test_async_def_node_runs():
    @node
    async def bump(state: S):
        return {"count": state.count + 1}

    assert _run(bump).state.count == 1


def test_plain_def_node_runs():
    @node
    def bump(state: S):
        return {"count": state.count + 1}

    assert _run(bump).state.count == 1


def test_bound_method_node_runs_with_its_instance():
    class Counter:
        def __init__(self, step: int) -> None:
            self.step = step

        def bump(self, state: S) -> dict[str, int]:
            return {"count": state.count + self.step}

    made = node(Counter(5).bump)
    assert made.name == "bump"
    assert _run(made).state.count == 5


def test_lambda_with_a_name_is_a_node():
    made = node(lambda state: {"note": "λ"}, name="anon")
    assert _run(made).state.note == "λ"


# -- refused callables --------------------------------------------------------------------


def test_class_is_refused():
    class Worker:
        def __init__(self, state):
            pass

    with pytest.raises(
        TypeError, match="@node takes a function or a bound method, not the class Worker"
    ):
        node(Worker)


def test_callable_instance_is_refused():
    class Worker:
        def __call__(self, state):
            return None

    with pytest.raises(TypeError, match=r"got 'Worker'. Callable instances are refused"):
        node(Worker())


def test_partial_is_refused():
    def f(state, extra):
        return None

    with pytest.raises(TypeError, match=r"does not take functools.partial objects"):
        node(functools.partial(f, extra=1))


def test_second_decorator_is_refused():
    @node
    def once(state):
        return None

    with pytest.raises(TypeError, match="<node once> is already a node; apply @node once"):
        node(once)


def test_builtin_function_is_refused():
    with pytest.raises(TypeError, match="got 'builtin_function_or_method'"):
        node(len)


def test_lambda_without_a_name_is_refused():
    with pytest.raises(TypeError, match=r"A lambda needs a name: use node\(fn, name='my_node'\)"):
        node(lambda state: None)


@pytest.mark.parametrize("name", ["", "   ", 3])
def test_blank_or_non_string_name_is_refused(name):
    def f(state):
        return None

    with pytest.raises(TypeError, match="A node name must be a non-blank string"):
        node(f, name=name)


@pytest.mark.parametrize("timeout", [0, -0.5, "1"])
def test_timeout_must_be_a_positive_number(timeout):
    def f(state):
        return None

    with pytest.raises(TypeError, match=r"@node\(timeout=...\) takes a positive number of seconds"):
        node(f, timeout=timeout)


# -- parameters ---------------------------------------------------------------------------


def test_function_without_parameters_is_refused():
    def nothing():
        return None

    with pytest.raises(
        GraphConfigError, match="Node 'nothing' must take the state as its first parameter"
    ):
        node(nothing)


def test_function_taking_only_a_context_is_refused():
    def only_ctx(ctx: NodeContext):
        return None

    with pytest.raises(
        GraphConfigError, match="Node 'only_ctx' must take the state as its first parameter"
    ):
        node(only_ctx)


def test_function_with_three_required_parameters_is_refused():
    def three(state, ctx: NodeContext, extra):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'three' has the required parameter 'extra', which has no annotation; "
        r"a node gets only the state, by its NodeContext annotation the context, and by an "
        r"annotation with a pydantic model its task input\. "
        r"Annotate it as the context \(def three\(state, extra: NodeContext\)\), give it a "
        r"default, or remove it\.",
    ):
        node(three)


def test_two_parameters_without_a_context_annotation_are_refused():
    def two(state, ctx):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'two' has the required parameter 'ctx', which has no annotation; .*"
        r"\(def two\(state, ctx: NodeContext\)\)",
    ):
        node(two)


def test_second_parameter_annotated_with_another_type_is_refused():
    def typed(state, ctx: int):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'typed' has the required parameter 'ctx', which is annotated int;",
    ):
        node(typed)


def test_keyword_only_parameter_without_the_context_annotation_is_refused():
    def kw(state, *, ctx):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'kw' has the required keyword-only parameter 'ctx', which has no "
        r"annotation; .* \(def kw\(state, \*, ctx: NodeContext\)\), give it a default, or "
        r"remove it\.",
    ):
        node(kw)


def test_keyword_only_parameter_annotated_with_another_type_is_refused():
    def kw(state, *, ctx: str):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'kw' has the required keyword-only parameter 'ctx', which is annotated str;",
    ):
        node(kw)


def test_two_context_parameters_are_refused():
    def twice(state, ctx: NodeContext, *, again: NodeContext):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'twice' has 2 parameters annotated NodeContext \('ctx', 'again'\); it "
        r"gets one context, so keep one of them\.",
    ):
        node(twice)


def test_context_parameter_after_two_positional_parameters_is_refused():
    # Called as fn(state, ctx), the context would land in 'factor'.
    def late(state, factor=2, ctx: NodeContext | None = None):
        return None

    with pytest.raises(
        GraphConfigError,
        match=r"Node 'late' takes its NodeContext parameter 'ctx' as positional parameter 3, "
        r"where the context would land in another parameter; .* "
        r"def late\(state, \*, ctx: NodeContext\)\.",
    ):
        node(late)


def test_keyword_only_parameters_with_defaults_are_allowed():
    @node
    def f(state: S, *, factor: int = 3):
        return {"count": factor}

    assert (f.wants_ctx, f.ctx_keyword) == (False, None)
    assert _run(f).state.count == 3


def test_extra_parameters_with_defaults_are_allowed():
    def f(state, factor=2):
        return {"count": factor}

    made = node(f)
    assert made.wants_ctx is False
    assert _run(made).state.count == 2


def test_context_parameter_may_have_any_name_and_come_second():
    @node
    def f(state: S, anything: NodeContext):
        return {"note": f"{type(state).__name__}/{anything.node}"}

    assert (f.wants_ctx, f.ctx_first) == (True, False)
    assert _run(f).state.note == "S/f"


def test_context_parameter_may_come_first():
    @node
    def f(info: NodeContext, state: S):
        return {"note": f"{type(state).__name__}/{info.node}"}

    assert (f.wants_ctx, f.ctx_first) == (True, True)
    assert _run(f).state.note == "S/f"


def test_keyword_only_context_parameter_is_passed_by_its_name():
    @node
    def f(state: S, *, info: NodeContext):
        return {"note": f"{type(state).__name__}/{info.node}/{info.step}"}

    assert (f.wants_ctx, f.ctx_keyword) == (True, "info")
    assert _run(f).state.note == "S/f/0"


@pytest.mark.anyio
async def test_keyword_only_context_parameter_of_an_async_node_is_passed():
    @node
    async def f(state: S, *, ctx: NodeContext):
        return {"note": ctx.task_id}

    graph = Graph(S).flow(START >> f, f >> END)
    assert (await graph.ainvoke({})).state.note == "f"


def test_keyword_only_context_with_an_unresolvable_string_annotation_is_found():
    class Local(BaseState):  # unknown to get_type_hints: this module's annotations are strings
        note: str = ""

    def f(state: Local, *, ctx: NodeContext):
        return {"note": ctx.node}

    assert isinstance(f.__annotations__["ctx"], str)
    made = node(f)
    assert made.ctx_keyword == "ctx"
    graph = Graph(Local).flow(START >> made, made >> END)
    assert graph.invoke({}).state.note == "f"


def test_an_optional_context_parameter_gets_the_context():
    @node
    def f(state: S, ctx: NodeContext | None = None):
        return {"note": ctx.node if ctx is not None else "called directly"}

    @node
    def g(state: S, *, ctx: NodeContext | None = None):
        return {"count": ctx.step + 7 if ctx is not None else 0}

    assert f.fn(S()) == {"note": "called directly"}
    assert _run(f).state.note == "f"
    assert _run(g).state.count == 7


def test_context_annotation_may_be_a_dotted_string():
    def f(state, ctx):
        return {"note": ctx.task_id}

    # An annotation that cannot be resolved is matched by its last dotted part.
    f.__annotations__["ctx"] = "nodestep.NodeContext"
    made = node(f)
    assert made.wants_ctx is True
    assert _run(made).state.note == "f"


# -- NodeContext --------------------------------------------------------------------------


def test_node_context_describes_the_run_and_the_task():
    seen: list[NodeContext] = []

    @node
    def first(state: S, ctx: NodeContext):
        seen.append(ctx)
        return None

    @node
    def second(state: S, ctx: NodeContext):
        seen.append(ctx)
        return None

    graph = Graph(S, name="poll", state_store=InMemoryStateStore())
    graph.flow(START >> first, first >> second, second >> END)
    result = graph.invoke({}, thread_id="thread-1")
    a, b = seen
    assert (a.graph_name, a.node, a.task_id, a.step) == ("poll", "first", "first", 0)
    assert (b.graph_name, b.node, b.task_id, b.step) == ("poll", "second", "second", 1)
    for ctx in seen:
        assert ctx.run_id == result.run_id
        assert ctx.thread_id == "thread-1"
        assert ctx.branch_id == "main"
        assert ctx.cache == {}
        assert isinstance(ctx.cache, dict)


def test_context_gives_the_object_passed_to_the_run():
    passed = object()
    got: list[Any] = []

    @node
    def f(state: S, ctx: NodeContext):
        got.append(ctx.context)
        return None

    _run(f, context=passed)
    assert got == [passed]
    assert got[0] is passed


def test_context_none_is_a_context():
    got: list[Any] = []

    @node
    def f(state: S, ctx: NodeContext):
        got.append(ctx.context)
        return None

    _run(f, context=None)
    assert got == [None]


def test_reading_context_without_one_raises_context_not_provided():
    @node
    def needy(state: S, ctx: NodeContext):
        return {"note": ctx.context}

    with pytest.raises(
        ContextNotProvidedError, match=r"Node 'needy' read ctx.context, but the run got no context"
    ) as info:
        _run(needy)
    assert isinstance(info.value, LookupError)
    assert isinstance(info.value, NodestepError)


def test_emit_without_a_custom_stream_does_nothing():
    @node
    def chatty(state: S, ctx: NodeContext):
        ctx.emit({"progress": 1})
        return {"count": 1}

    assert _run(chatty).state.count == 1


@pytest.mark.parametrize("name", ["START", "END"])
def test_a_node_cannot_take_the_name_of_a_flow_end(name):
    with pytest.raises(TypeError, match=f"A node cannot be named '{name}'"):
        node(lambda state: None, name=name)


@pytest.mark.parametrize("name", ["write[1]", "x[0]", "a[12]"])
def test_a_node_name_that_looks_like_a_task_id_is_refused(name):
    base = name[: name.index("[")]
    with pytest.raises(TypeError, match=rf"looks like the id of a task of node '{base}'"):
        node(lambda state: None, name=name)


@pytest.mark.parametrize("name", ["[1]x", "a[b]", "list[int]", "a [1] b"])
def test_brackets_elsewhere_in_a_node_name_are_fine(name):
    assert node(lambda state: None, name=name).name == name
