"""Interrupts: a node pauses the run for a person; a later call resumes it with answers.

Also edits of a paused thread, breakpoints, and the terminal event of a paused stream.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import Counter
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    GraphInterrupt,
    InMemoryStateStore,
    Interrupt,
    InterruptEventData,
    InvalidUpdateError,
    NodeContext,
    Replace,
    Resume,
    ResumeError,
    Send,
    StateStoreError,
    UnknownThreadError,
    add,
    interrupt,
    node,
    when,
)
from nodestep.store import StateStore
from store_helpers import records, records_sync, reopened


class Desk(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    amount: int = 0
    decision: str = ""
    note: str = ""
    answer: Any = None


def approval_graph(store: StateStore | None, calls: Counter[str]) -> Graph[Desk]:
    """prepare >> approve (pauses) >> book."""

    @node
    def prepare(state: Desk) -> dict:
        calls["prepare"] += 1
        return {"amount": 120, "log": ["prepared"]}

    @node
    def approve(state: Desk) -> dict:
        calls["approve"] += 1
        decision = interrupt({"amount": state.amount}, id="approve")
        return {"decision": decision, "log": [f"decided {decision}"]}

    @node
    def book(state: Desk) -> dict:
        calls["book"] += 1
        return {"log": ["booked"]}

    graph = Graph(Desk, state_store=store)
    return graph.flow(START >> prepare, prepare >> approve, approve >> book, book >> END)


# -- pausing ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_interrupt_pauses_the_run_and_reports_the_pending_interrupt(
    store: StateStore,
) -> None:
    calls: Counter[str] = Counter()
    graph = approval_graph(store, calls)
    result = await graph.ainvoke({}, thread_id="t")
    assert result.status == "interrupted"
    assert result.step == 1
    assert result.interrupts == {
        "approve:approve": Interrupt(
            key="approve:approve",
            id="approve",
            node="approve",
            task_id="approve",
            payload={"amount": 120},
        )
    }
    # The state before the paused superstep.
    assert result.state == Desk(log=["prepared"], amount=120)
    last = (await records(store, "t"))[-1]
    assert last["type"] == "run_paused" and result.checkpoint_id == last["id"]
    assert calls == Counter(prepare=1, approve=1)

    snapshot = await approval_graph(reopened(store), calls).get_state("t")
    assert (snapshot.status, snapshot.next) == ("paused", ("approve",))
    assert list(snapshot.interrupts) == ["approve:approve"]
    assert snapshot.value == result.state


@pytest.mark.anyio
async def test_resume_reruns_the_node_from_the_top_with_the_answer(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    await approval_graph(store, calls).ainvoke({}, thread_id="t")
    result = await approval_graph(reopened(store), calls).ainvoke(
        None, thread_id="t", resume=Resume("yes")
    )
    assert result.status == "completed" and result.interrupts == {}
    assert result.state == Desk(
        log=["prepared", "decided yes", "booked"], amount=120, decision="yes"
    )
    assert calls == Counter(prepare=1, approve=2, book=1)
    started = [r for r in await records(store, "t") if r["type"] == "run_started"][-1]
    assert started["answers"] == {"approve:approve": "yes"} and "input" not in started


def test_interrupt_without_a_store_says_so() -> None:
    graph = approval_graph(None, Counter())
    with pytest.raises(
        GraphExecutionError,
        match=r"^Node 'approve' called interrupt\(id='approve'\), but the run has no state store",
    ) as caught:
        graph.invoke({})
    assert "approve" in str(caught.value)


@pytest.mark.parametrize("good_id", ["approve", "A_b.c-9", "x", "2nd.try"])
def test_interrupt_ids_made_of_letters_digits_underscore_dot_dash_are_accepted(
    store: StateStore, good_id: str
) -> None:
    @node
    def ask(state: Desk) -> dict:
        return {"answer": interrupt("?", id=good_id)}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    assert list(graph.invoke({}, thread_id="t").interrupts) == [f"ask:{good_id}"]


@pytest.mark.parametrize("bad_id", ["", "with space", "a:b", "slash/y", "é", "tab\t", 7, None])
@pytest.mark.anyio
async def test_interrupt_ids_with_other_characters_are_refused(
    store: StateStore, bad_id: Any
) -> None:
    @node
    def ask(state: Desk) -> dict:
        return {"answer": interrupt("?", id=bad_id)}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    called = re.escape(f"Node 'ask' called interrupt() with id={bad_id!r}")
    with pytest.raises(GraphExecutionError, match=f"^{called}; an id is made of letters, digits"):
        await graph.ainvoke({}, thread_id="t")
    assert (await graph.get_state("t")).status == "failed"


def test_interrupt_needs_an_id(store: StateStore) -> None:
    @node
    def ask(state: Desk) -> dict:
        return {"answer": interrupt("?")}  # type: ignore[call-arg]

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    with pytest.raises(TypeError, match=r"interrupt\(\) needs id=: the id names the question"):
        graph.invoke({}, thread_id="t")


def test_an_id_repeated_in_one_node_run_is_refused(store: StateStore) -> None:
    @node
    def ask(state: Desk) -> dict:
        first = interrupt("one", id="q")
        second = interrupt("two", id="q")
        return {"log": [first, second]}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    assert graph.invoke({}, thread_id="t").status == "interrupted"
    with pytest.raises(
        GraphExecutionError, match=r"^Node 'ask' called interrupt\(\) twice with id 'q'"
    ):
        graph.invoke(None, thread_id="t", resume=Resume("a"))


def test_except_exception_in_a_node_does_not_swallow_the_pause(store: StateStore) -> None:
    swallowed: list[BaseException] = []

    @node
    def careful(state: Desk) -> dict:
        try:
            answer = interrupt("?", id="q")
        except Exception as error:  # what node code often does around a call
            swallowed.append(error)
            answer = "swallowed"
        return {"answer": answer}

    graph = Graph(Desk, state_store=store).flow(START >> careful, careful >> END)
    assert issubclass(GraphInterrupt, BaseException) and not issubclass(GraphInterrupt, Exception)
    assert graph.invoke({}, thread_id="t").status == "interrupted"
    assert swallowed == []
    assert graph.invoke(None, thread_id="t", resume=Resume(1)).state.answer == 1


# -- answering ---------------------------------------------------------------------------------


def two_signoffs_graph(store: StateStore, calls: Counter[str]) -> Graph[Desk]:
    """legal and finance pause in one superstep; clerk finishes in it."""

    @node
    def legal(state: Desk) -> dict:
        calls["legal"] += 1
        return {"log": [f"legal {interrupt('legal?', id='sign')}"]}

    @node
    async def finance(state: Desk) -> dict:
        calls["finance"] += 1
        return {"log": [f"finance {interrupt({'limit': 100}, id='sign')}"]}

    @node
    def clerk(state: Desk) -> dict:
        calls["clerk"] += 1
        return {"note": "filed", "log": ["clerk"]}

    @node(goto=[legal, finance, clerk])
    def route(state: Desk) -> Command:
        return Command(goto=[legal, finance, clerk])

    graph = Graph(Desk, state_store=store)
    return graph.flow(START >> route, legal >> END, finance >> END, clerk >> END)


@pytest.mark.anyio
async def test_several_nodes_pause_in_one_superstep_and_are_answered_by_key(
    store: StateStore,
) -> None:
    calls: Counter[str] = Counter()
    graph = two_signoffs_graph(store, calls)
    paused = await graph.ainvoke({}, thread_id="t")
    assert list(paused.interrupts) == ["finance:sign", "legal:sign"]
    assert paused.interrupts["finance:sign"].payload == {"limit": 100}
    # The finished task's write is not in the paused result; it applies on resume.
    assert paused.state.note == ""
    assert [r["type"] for r in await records(store, "t")][-2:] == ["task_finished", "run_paused"]

    answers = {"legal:sign": "ok", "finance:sign": "approved"}
    result = await two_signoffs_graph(reopened(store), calls).ainvoke(
        None, thread_id="t", resume=Resume(answers=answers)
    )
    assert result.state == Desk(log=["clerk", "finance approved", "legal ok"], note="filed")
    assert calls == Counter(legal=2, finance=2, clerk=1)


def test_a_node_with_two_interrupts_pauses_twice_and_keeps_the_first_answer(
    store: StateStore,
) -> None:
    runs: list[str] = []

    @node
    def interview(state: Desk) -> dict:
        runs.append("start")
        name = interrupt("name?", id="name")
        runs.append(f"name={name}")
        age = interrupt("age?", id="age")
        return {"log": [f"{name} {age}"]}

    graph = Graph(Desk, state_store=store).flow(START >> interview, interview >> END)
    assert list(graph.invoke({}, thread_id="t").interrupts) == ["interview:name"]
    second = graph.invoke(None, thread_id="t", resume=Resume("Ada"))
    assert list(second.interrupts) == ["interview:age"]
    assert second.interrupts["interview:age"].payload == "age?"
    done = graph.invoke(None, thread_id="t", resume=Resume(36))
    assert done.state.log == ["Ada 36"]
    assert runs == ["start", "start", "name=Ada", "start", "name=Ada"]


def test_sends_pause_per_task_and_are_answered_by_task_key(store: StateStore) -> None:
    @node
    def review(state: Desk) -> dict:
        return {"log": [f"{state.note}: {interrupt(state.note, id='ok')}"]}

    @node(goto=[review])
    def dispatch(state: Desk) -> list[Send] | Command:
        return Command(goto=[Send(review, {"note": n}) for n in ("x", "y", "z")])

    graph = Graph(Desk, state_store=store).flow(START >> dispatch, review >> END)
    paused = graph.invoke({}, thread_id="t")
    assert {k: i.payload for k, i in paused.interrupts.items()} == {
        "review:ok": "x",
        "review[1]:ok": "y",
        "review[2]:ok": "z",
    }
    assert paused.interrupts["review[2]:ok"].task_id == "review[2]"
    answers = {"review:ok": 1, "review[1]:ok": 2, "review[2]:ok": 3}
    result = graph.invoke(None, thread_id="t", resume=Resume(answers=answers))
    assert result.state.log == ["x: 1", "y: 2", "z: 3"]


async def _assert_refused_before_anything_runs(
    graph: Graph[Desk], store: StateStore, calls: Counter[str], match: str, **call: Any
) -> ResumeError:
    before_records, before_calls = await records(store, "t"), Counter(calls)
    with pytest.raises(ResumeError, match=match) as caught:
        await graph.ainvoke(None, thread_id="t", **call)
    assert await records(store, "t") == before_records
    assert calls == before_calls
    return caught.value


@pytest.mark.anyio
async def test_resume_answers_are_checked_before_anything_runs(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    graph = two_signoffs_graph(store, calls)
    await graph.ainvoke({}, thread_id="t")
    pending = ("finance:sign", "legal:sign")

    error = await _assert_refused_before_anything_runs(
        graph,
        store,
        calls,
        r"^Thread 't' has 2 pending interrupts \('finance:sign', 'legal:sign'\); answer each by",
        resume=Resume("one"),
    )
    assert error.pending == pending and "'finance:sign', 'legal:sign'" in str(error)

    error = await _assert_refused_before_anything_runs(
        graph,
        store,
        calls,
        "^Resume must answer every pending interrupt of thread 't'; missing: 'finance:sign'",
        resume=Resume(answers={"legal:sign": 1}),
    )
    assert "missing: 'finance:sign'" in str(error) and error.pending == pending

    error = await _assert_refused_before_anything_runs(
        graph,
        store,
        calls,
        "^Resume answers 'clerk:sign', which is not pending on thread 't'",
        resume=Resume(answers={"legal:sign": 1, "finance:sign": 2, "clerk:sign": 3}),
    )
    assert "'clerk:sign'" in str(error) and "Pending: 'finance:sign', 'legal:sign'" in str(error)

    error = await _assert_refused_before_anything_runs(  # no resume at all
        graph, store, calls, "^Thread 't' is paused, waiting for answers to 'finance:sign', 'legal"
    )
    assert error.pending == pending

    # All answered: the run goes on.
    answers = {"legal:sign": 1, "finance:sign": 2}
    assert (
        await graph.ainvoke(None, thread_id="t", resume=Resume(answers=answers))
    ).status == "completed"


@pytest.mark.anyio
async def test_resume_with_nothing_pending_is_refused(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    graph = approval_graph(store, calls)
    await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    # Answering twice: the second finds nothing pending, and changes nothing.
    error = await _assert_refused_before_anything_runs(
        graph,
        store,
        calls,
        "^resume= was given, but thread 't' has no pending interrupt",
        resume=Resume("again"),
    )
    assert error.pending == () and "no pending interrupt" in str(error)

    with pytest.raises(UnknownThreadError, match=r"^Thread 'ghost' has no history to resume"):
        await graph.ainvoke(None, thread_id="ghost", resume=Resume("x"))
    with pytest.raises(
        GraphConfigError, match=r"^resume= needs a state store and the paused thread"
    ):
        await approval_graph(None, calls).ainvoke(None, resume=Resume("x"))


@pytest.mark.anyio
async def test_resume_takes_only_a_resume_with_an_answer(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    graph = approval_graph(store, calls)
    await graph.ainvoke({}, thread_id="t")
    before = await records(store, "t")
    with pytest.raises(TypeError, match=r"^resume= takes a Resume, got str: pass resume=Resume"):
        await graph.ainvoke(None, thread_id="t", resume="yes")
    with pytest.raises(TypeError, match=r"^resume= takes a Resume, got dict: pass resume=Resume"):
        await graph.ainvoke(None, thread_id="t", resume={"approve:approve": "yes"})
    with pytest.raises(TypeError, match=r"^Resume needs an answer: Resume\(value\) or"):
        Resume()
    with pytest.raises(TypeError, match=r"^Resume takes one value or answers=.*, not both"):
        Resume("x", answers={"k": 1})
    with pytest.raises(
        TypeError, match=r"takes a dict of key -> answer, got \['not', 'a', 'dict'\]"
    ):
        Resume(answers=["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(
        ResumeError, match=r"^Pass input=None with resume=: a resumed run takes only"
    ):
        await graph.ainvoke({"note": "x"}, thread_id="t", resume=Resume("yes"))
    assert await records(store, "t") == before

    # None is an answer like any other.
    @node
    def ask(state: Desk) -> dict:
        return {"answer": ["got", interrupt("?", id="q")]}

    other = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    await other.ainvoke({}, thread_id="u")
    assert (await other.ainvoke(None, thread_id="u", resume=Resume(None))).state.answer == [
        "got",
        None,
    ]


class Verdict(BaseModel):
    ok: bool
    on: dt.date


@pytest.mark.anyio
async def test_answers_are_normalized_to_json_values(store: StateStore) -> None:
    seen: list[Any] = []

    @node
    def ask(state: Desk) -> dict:
        answer = interrupt("verdict?", id="v")
        seen.append(answer)
        return {"answer": answer}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    uid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    answer = {"verdict": Verdict(ok=True, on=dt.date(2025, 1, 31)), "pair": (1, 2), "id": uid}
    await graph.ainvoke({}, thread_id="t")
    result = await graph.ainvoke(None, thread_id="t", resume=Resume(answer))
    expected = {
        "verdict": {"ok": True, "on": "2025-01-31"},
        "pair": [1, 2],
        "id": "12345678-1234-5678-1234-567812345678",
    }
    # The live node sees what a later process would read back: plain JSON data.
    assert seen == [expected] and result.state.answer == expected
    stored = [r for r in await records(reopened(store), "t") if r["type"] == "run_started"][-1]
    assert stored["answers"] == {"ask:v": expected}

    await graph.ainvoke({}, thread_id="u")
    day = await graph.ainvoke(None, thread_id="u", resume=Resume(dt.date(2025, 2, 1)))
    assert day.state.answer == "2025-02-01"


@pytest.mark.anyio
async def test_payloads_are_normalized_to_json_values(store: StateStore) -> None:
    @node
    def ask(state: Desk) -> dict:
        return {"answer": interrupt(Verdict(ok=False, on=dt.date(2025, 1, 1)), id="v")}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    paused = await graph.ainvoke({}, thread_id="t")
    assert paused.interrupts["ask:v"].payload == {"ok": False, "on": "2025-01-01"}
    assert (await graph.get_state("t")).interrupts["ask:v"].payload == {
        "ok": False,
        "on": "2025-01-01",
    }


@pytest.mark.parametrize("where", ["payload", "answer", "cache"])
@pytest.mark.anyio
async def test_a_pause_value_that_does_not_survive_json_is_refused_when_written(where: str) -> None:
    """JSON has no nan or infinity; storing one as null would change it silently.

    (The store does not matter here: the value must be refused before it reaches one.)
    """
    store = InMemoryStateStore()
    value = float("nan")

    @node
    def ask(state: Desk, ctx: NodeContext) -> dict:
        if where == "cache":
            ctx.cache["score"] = value
        payload = {"score": value} if where == "payload" else "score?"
        return {"answer": repr(interrupt(payload, id="q"))}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    if where != "answer":
        what = {"payload": "The payload of interrupt 'ask:q'", "cache": r"ctx\.cache of task 'ask'"}
        with pytest.raises(StateStoreError, match=f"^{what[where]} does not survive a JSON round"):
            await graph.ainvoke({}, thread_id="t")
        assert not any(r["type"] == "run_paused" for r in await records(store, "t"))
        return
    await graph.ainvoke({}, thread_id="t")
    before = await records(store, "t")
    with pytest.raises(StateStoreError, match=r"^The resume answer does not survive a JSON round"):
        await graph.ainvoke(None, thread_id="t", resume=Resume({"score": value}))
    assert await records(store, "t") == before


@pytest.mark.anyio
async def test_a_cache_or_payload_without_a_json_form_is_refused(store: StateStore) -> None:
    @node
    def ask(state: Desk, ctx: NodeContext) -> dict:
        ctx.cache["client"] = object()
        return {"answer": interrupt("?", id="q")}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    with pytest.raises(
        StateStoreError, match=r"^ctx\.cache of task 'ask' cannot be stored as JSON"
    ):
        await graph.ainvoke({}, thread_id="t")
    assert not any(r["type"] == "run_paused" for r in await records(store, "t"))

    @node
    def ask_object(state: Desk) -> dict:
        return {"answer": interrupt(object(), id="q")}

    other = Graph(Desk, state_store=store).flow(START >> ask_object, ask_object >> END)
    with pytest.raises(
        StateStoreError, match=r"^The payload of interrupt 'ask_object:q' cannot be stored as JSON"
    ):
        await other.ainvoke({}, thread_id="u")


# -- ctx.cache ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ctx_cache_survives_the_pause_and_is_empty_everywhere_else(store: StateStore) -> None:
    expensive: list[int] = []
    caches: list[tuple[str, int, dict[str, Any]]] = []

    @node
    def draft(state: Desk, ctx: NodeContext) -> dict:
        caches.append((ctx.task_id, ctx.step, dict(ctx.cache)))
        if "draft" not in ctx.cache:
            expensive.append(1)
            ctx.cache["draft"] = f"draft {len(state.log)}"
            ctx.cache["parts"] = [1, {"n": 2}]
        verdict = interrupt(ctx.cache["draft"], id="check")
        return {"log": [f"{ctx.cache['draft']} {verdict}"]}

    @node
    def sibling(state: Desk, ctx: NodeContext) -> dict:
        caches.append((ctx.task_id, ctx.step, dict(ctx.cache)))
        ctx.cache["sibling"] = "not kept: this task finishes"
        return {"note": "sibling"}

    @node(goto=[draft, sibling])
    def split(state: Desk) -> Command:
        return Command(goto=[draft, sibling])

    graph = Graph(Desk, state_store=store, max_steps=10).flow(
        START >> split,
        draft >> when(lambda s: len(s.log) < 2, split, otherwise=END),
        sibling >> END,
    )

    def by_task(calls: list[tuple[str, int, dict[str, Any]]]) -> dict[str, list[tuple[Any, ...]]]:
        # draft and sibling run on worker threads of one superstep, so either may start
        # first: compare the calls of each task, in that task's own order.
        seen: dict[str, list[tuple[Any, ...]]] = {}
        for task_id, step, cache in calls:
            seen.setdefault(task_id, []).append((step, cache))
        return seen

    paused = await graph.ainvoke({}, thread_id="t")
    assert paused.interrupts["draft:check"].payload == "draft 0"
    assert by_task(caches) == {"draft": [(1, {})], "sibling": [(1, {})]}
    paused_record = (await records(store, "t"))[-1]
    assert paused_record["caches"] == {"draft": {"draft": "draft 0", "parts": [1, {"n": 2}]}}

    again = Graph(Desk, state_store=reopened(store), max_steps=10)
    second = await again.flow(
        START >> split,
        draft >> when(lambda s: len(s.log) < 2, split, otherwise=END),
        sibling >> END,
    ).ainvoke(None, thread_id="t", resume=Resume("ok"))
    # The next superstep's draft task starts with an empty cache, and pauses again.
    assert list(second.interrupts) == ["draft:check"]
    assert second.interrupts["draft:check"].payload == "draft 1"
    # The resumed draft task runs alone, with its cache; sibling had finished.
    assert caches[2] == ("draft", 1, {"draft": "draft 0", "parts": [1, {"n": 2}]})
    assert by_task(caches[3:]) == {"draft": [(3, {})], "sibling": [(3, {})]}
    assert [step for _, step, _ in caches] == [1, 1, 1, 3, 3]
    assert by_task(caches) == {
        "draft": [(1, {}), (1, {"draft": "draft 0", "parts": [1, {"n": 2}]}), (3, {})],
        "sibling": [(1, {}), (3, {})],
    }
    assert len(expensive) == 2
    done = await graph.ainvoke(None, thread_id="t", resume=Resume("fine"))
    assert done.state.log == ["draft 0 ok", "draft 1 fine"]


@pytest.mark.anyio
async def test_ctx_cache_is_empty_for_a_node_that_never_paused(store: StateStore) -> None:
    seen: list[dict[str, Any]] = []

    @node
    def loop(state: Desk, ctx: NodeContext) -> dict:
        seen.append(dict(ctx.cache))
        ctx.cache["n"] = len(state.log)
        return {"log": ["x"]}

    graph = Graph(Desk, state_store=store).flow(
        START >> loop, loop >> when(lambda s: len(s.log) < 3, loop, otherwise=END)
    )
    await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke({}, thread_id="t")
    assert seen == [{}] * 4
    assert not any("caches" in r for r in await records(store, "t"))


# -- editing a paused thread ----------------------------------------------------------------


def edit_graph(store: StateStore, seen: list[Desk]) -> Graph[Desk]:
    """quote finishes and review pauses, in one superstep."""

    @node
    def quote(state: Desk) -> dict:
        return {"amount": 100, "log": ["quoted"]}

    @node
    def review(state: Desk) -> dict:
        answer = interrupt({"note": state.note}, id="review")
        seen.append(state.model_copy(deep=True))
        return {"note": f"{answer} ({state.note})", "decision": answer}

    @node(goto=[quote, review])
    def start(state: Desk) -> Command:
        return Command(goto=[quote, review])

    return Graph(Desk, state_store=store).flow(START >> start, quote >> END, review >> END)


@pytest.mark.anyio
async def test_editing_a_field_a_finished_task_wrote_is_refused(store: StateStore) -> None:
    graph = edit_graph(store, [])
    await graph.ainvoke({}, thread_id="t")
    before = await records(store, "t")
    refused = (
        "^Field '{}' of thread 't' was already written by 'quote' in the unfinished superstep 1"
    )
    with pytest.raises(InvalidUpdateError, match=refused.format("amount")) as caught:
        await graph.update_state("t", {"amount": 90})
    error = caught.value
    assert (error.field, error.writers, error.step) == ("amount", ("quote", "update_state"), 1)
    assert "quote" in str(error) and "amount" in str(error)
    # Replace skips the reducer, so it counts as changing the field too.
    with pytest.raises(InvalidUpdateError, match=refused.format("log") + r", and a Replace\("):
        await graph.update_state("t", {"log": Replace(["reset"])})
    # Several fields at once: refused as a whole, nothing applied.
    with pytest.raises(InvalidUpdateError, match=refused.format("amount")):
        await graph.update_state("t", {"note": "fine", "amount": 1})
    assert await records(reopened(store), "t") == before


@pytest.mark.anyio
async def test_other_edits_of_a_paused_thread_apply_and_the_nodes_own_write_wins(
    store: StateStore,
) -> None:
    seen: list[Desk] = []
    graph = edit_graph(store, seen)
    await graph.ainvoke({}, thread_id="t")
    await graph.update_state("t", {"note": "check the discount", "decision": "edited"})
    await graph.update_state("t", {"log": ["appended by a person"]})  # a merging reducer
    assert (await graph.get_state("t")).status == "paused"

    result = await edit_graph(reopened(store), seen).ainvoke(
        None, thread_id="t", resume=Resume("ok")
    )
    assert seen[-1].note == "check the discount" and seen[-1].decision == "edited"
    assert result.state == Desk(
        log=["appended by a person", "quoted"],
        amount=100,
        note="ok (check the discount)",
        decision="ok",  # the node's write wins over the edit
    )


# -- streams and breakpoints ---------------------------------------------------------------------


def test_a_paused_stream_ends_with_an_interrupt_event(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    graph = approval_graph(store, calls)
    events = list(graph.stream({}, thread_id="t", stream_mode=["updates", "values"]))
    modes = [e.mode for e in events]
    assert modes == ["updates", "values", "interrupt"]
    terminal = events[-1]
    assert isinstance(terminal.data, InterruptEventData)
    assert terminal.data.thread_id == "t"
    assert terminal.data.state == Desk(log=["prepared"], amount=120)
    assert list(terminal.data.interrupts) == ["approve:approve"]
    assert terminal.step == 1 and terminal.checkpoint_id == records_sync(store, "t")[-1]["id"]

    only = list(graph.stream(None, thread_id="t", stream_mode=[], resume=Resume("no")))
    assert [e.mode for e in only] == ["final"]
    assert only[0].data.state.decision == "no"


def breakpoint_graph(store: StateStore, calls: Counter[str], **options: Any) -> Graph[Desk]:
    @node
    def one(state: Desk) -> dict:
        calls["one"] += 1
        return {"log": ["one"]}

    @node
    def two(state: Desk) -> dict:
        calls["two"] += 1
        return {"log": ["two"]}

    @node
    def three(state: Desk) -> dict:
        calls["three"] += 1
        return {"log": ["three"]}

    graph = Graph(Desk, state_store=store, **options)
    return graph.flow(START >> one, one >> two, two >> three, three >> END)


@pytest.mark.parametrize("where", ["graph", "call"])
@pytest.mark.anyio
async def test_interrupt_before_stops_at_the_superstep_boundary(
    store: StateStore, where: str
) -> None:
    calls: Counter[str] = Counter()
    on_graph = {"interrupt_before": ["two"]} if where == "graph" else {}
    on_call = {"interrupt_before": ["two"]} if where == "call" else {}
    graph = breakpoint_graph(store, calls, **on_graph)
    stopped = await graph.ainvoke({}, thread_id="t", **on_call)
    assert (stopped.status, stopped.interrupts, stopped.step) == ("interrupted", {}, 1)
    assert stopped.state.log == ["one"] and calls == Counter(one=1)
    last = (await records(store, "t"))[-1]
    assert last["type"] == "run_stopped"
    assert (last["reason"], last["nodes"], last["step"]) == ("interrupt_before", ["two"], 1)
    snapshot = await graph.get_state("t")
    assert (snapshot.status, snapshot.next) == ("running", ("two",))

    # The continuation does not stop again before the superstep it continues.
    result = await graph.ainvoke(None, thread_id="t", **on_call)
    assert result.status == "completed" and result.state.log == ["one", "two", "three"]
    assert calls == Counter(one=1, two=1, three=1)


@pytest.mark.parametrize("where", ["graph", "call"])
@pytest.mark.anyio
async def test_interrupt_after_stops_after_the_nodes_superstep(
    store: StateStore, where: str
) -> None:
    calls: Counter[str] = Counter()
    on_graph = {"interrupt_after": ["one"]} if where == "graph" else {}
    on_call = {"interrupt_after": ["one"]} if where == "call" else {}
    graph = breakpoint_graph(store, calls, **on_graph)
    stopped = await graph.ainvoke({}, thread_id="t", **on_call)
    assert (stopped.status, stopped.interrupts) == ("interrupted", {})
    assert stopped.state.log == ["one"]
    last = (await records(store, "t"))[-1]
    assert (last["type"], last["reason"], last["nodes"]) == (
        "run_stopped",
        "interrupt_after",
        ["one"],
    )
    result = await graph.ainvoke(None, thread_id="t", **on_call)
    assert result.state.log == ["one", "two", "three"]
    assert calls == Counter(one=1, two=1, three=1)


@pytest.mark.anyio
async def test_breakpoints_on_the_call_replace_the_graphs(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    graph = breakpoint_graph(store, calls, interrupt_before=["two"])
    assert (await graph.ainvoke({}, thread_id="t", interrupt_before=[])).status == "completed"
    stopped = await graph.ainvoke({}, thread_id="u", interrupt_before=["three"])
    assert stopped.state.log == ["one", "two"]
    assert (await records(store, "u"))[-1]["nodes"] == ["three"]


def test_a_breakpoint_fires_again_on_a_later_superstep(store: StateStore) -> None:
    @node
    def tick(state: Desk) -> dict:
        return {"log": ["tick"]}

    graph = Graph(Desk, state_store=store, interrupt_before=[tick]).flow(
        START >> tick, tick >> when(lambda s: len(s.log) < 3, tick, otherwise=END)
    )
    lengths = []
    result = graph.invoke({}, thread_id="t")
    while result.status == "interrupted":
        lengths.append(len(result.state.log))
        result = graph.invoke(None, thread_id="t")
    assert lengths == [0, 1, 2] and result.state.log == ["tick"] * 3


def test_interrupt_after_the_last_node_lets_the_run_complete(store: StateStore) -> None:
    graph = breakpoint_graph(store, Counter(), interrupt_after=["three"])
    assert graph.invoke({}, thread_id="t").status == "completed"


def test_a_breakpoint_stream_ends_with_an_interrupt_event_without_interrupts(
    store: StateStore,
) -> None:
    graph = breakpoint_graph(store, Counter())
    events = list(
        graph.stream({}, thread_id="t", stream_mode="updates", interrupt_before=["three"])
    )
    assert [(e.mode, e.node) for e in events] == [
        ("updates", "one"),
        ("updates", "two"),
        ("interrupt", None),
    ]
    assert events[-1].data.interrupts == {} and events[-1].data.thread_id == "t"
    assert events[-1].data.state.log == ["one", "two"]


def test_breakpoints_naming_unknown_nodes_are_a_config_error() -> None:
    with pytest.raises(GraphConfigError, match=r"^Breakpoints name unknown nodes: nope\.$"):
        breakpoint_graph(InMemoryStateStore(), Counter(), interrupt_before=["nope"])


# -- new input and forks ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_new_input_on_a_paused_thread_is_refused_and_a_fork_is_the_way_out(
    store: StateStore,
) -> None:
    calls: Counter[str] = Counter()
    graph = approval_graph(store, calls)
    first = await graph.ainvoke({}, thread_id="t")
    with pytest.raises(ResumeError, match="or fork the thread at an earlier event") as caught:
        await graph.ainvoke({"note": "start over"}, thread_id="t")
    assert caught.value.pending == ("approve:approve",)

    # Fork at the paused event and answer there: main stays paused.
    branch = await graph.fork("t", from_=first.checkpoint_id)
    result = await graph.ainvoke(None, thread_id="t", branch_id=branch.id, resume=Resume("yes"))
    assert result.state.decision == "yes"
    assert (await graph.get_state("t")).status == "paused"
    # Fork before the pause: new input starts a new turn there.
    started = next(e for e in await graph.history("t") if e.type == "run_started")
    earlier = await graph.fork("t", from_=started.id)
    again = await graph.ainvoke({"note": "new"}, thread_id="t", branch_id=earlier.id)
    assert again.status == "interrupted" and again.state.note == "new"


@pytest.mark.anyio
async def test_a_cache_that_cannot_be_stored_fails_the_run_and_records_it(
    store: StateStore,
) -> None:
    @node
    def ask(state: Desk, ctx: NodeContext) -> dict:
        ctx.cache["client"] = object()
        return {"answer": interrupt("ok?", id="v")}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    with pytest.raises(StateStoreError, match=r"ctx\.cache of task 'ask'"):
        await graph.ainvoke({}, thread_id="t")
    last = (await records(reopened(store), "t"))[-1]
    assert (last["type"], last["error"]) == ("run_failed", "StateStoreError")


@pytest.mark.anyio
async def test_snapshot_interrupts_are_interrupt_objects(store: StateStore) -> None:
    @node
    def ask(state: Desk) -> dict:
        return {"answer": interrupt({"q": 1}, id="v")}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    await graph.ainvoke({}, thread_id="t")
    snapshot = await graph.get_state("t")
    assert snapshot.interrupts == {"ask:v": Interrupt("ask:v", "v", "ask", "ask", {"q": 1})}


def test_a_breakpoint_on_an_unknown_node_is_refused_per_call(store: StateStore) -> None:
    @node
    def ask(state: Desk) -> dict:
        return {}

    graph = Graph(Desk, state_store=store).flow(START >> ask, ask >> END)
    with pytest.raises(GraphConfigError, match="interrupt_before names 'nope'"):
        graph.invoke({}, thread_id="t", interrupt_before=["nope"])
    with pytest.raises(GraphConfigError, match="interrupt_after names 'nope'"):
        graph.invoke({}, thread_id="t", interrupt_after=["nope"])


@pytest.mark.anyio
async def test_a_replace_edit_of_an_add_field_written_by_a_finished_task_says_why(
    store: StateStore,
) -> None:
    @node
    def writer(state: Desk) -> dict:
        return {"log": ["writer"]}

    @node
    def ask(state: Desk) -> dict:
        return {"answer": interrupt("ok?", id="v")}

    @node(goto=[writer, ask])
    def split(state: Desk) -> Command:
        return Command(goto=[writer, ask])

    graph = Graph(Desk, state_store=store).flow(START >> split, writer >> END, ask >> END)
    await graph.ainvoke({}, thread_id="t")
    await graph.update_state("t", {"log": ["merged"]})  # add merges with the finished write
    with pytest.raises(InvalidUpdateError, match=r"a Replace\(\.\.\.\) edit does not merge"):
        await graph.update_state("t", {"log": Replace(["x"])})
