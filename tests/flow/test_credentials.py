"""Roles and credentials: a node sees only its own roles' credentials, and no secret is stored."""

from __future__ import annotations

import contextlib
import copy
import logging
import pickle
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from nodestep import (
    END,
    START,
    BaseState,
    Credentials,
    CredentialsError,
    CredentialsProvider,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    NodeContext,
    Resume,
    RetryPolicy,
    interrupt,
    node,
)
from nodestep.store import StateStore
from nodestep.testing import FakeTime
from store_helpers import open_file, records_sync

SECRET = "sk-live-Zq81xW-secret"
OTHER = "sk-admin-Pp02-secret"


class S(BaseState):
    step: str = ""
    note: str = ""


def provider() -> CredentialsProvider:
    return CredentialsProvider({"billing": SECRET, "admin": OTHER})


@node(roles=["billing"])
def charge(state: S, ctx: NodeContext) -> dict[str, Any]:
    creds = ctx.credentials("billing")
    assert creds.secret() == SECRET
    return {"note": f"charged with {creds}"}


def graph(first: Any, store: StateStore | None = None) -> Graph[S]:
    return Graph(S, state_store=store).flow(START >> first, first >> END)


def test_a_node_gets_the_credentials_of_its_role_which_print_as_the_role() -> None:
    result = graph(charge).invoke({}, credentials=provider())
    assert result.state.note == "charged with Credentials(role='billing')"


def test_asking_for_a_role_the_node_does_not_declare_is_an_error_naming_it() -> None:
    @node(roles=["billing"])
    def sneaky(state: S, ctx: NodeContext) -> dict[str, Any]:
        ctx.credentials("admin")
        return {}

    with pytest.raises(CredentialsError, match="role 'admin', which it does not declare") as e:
        graph(sneaky).invoke({}, credentials=provider())
    assert (e.value.node, e.value.role) == ("sneaky", "admin")
    assert OTHER not in str(e.value)


def test_a_role_another_node_resolved_is_still_refused_to_a_node_without_it() -> None:
    @node(roles=[])
    def plain(state: S, ctx: NodeContext) -> dict[str, Any]:
        ctx.credentials("billing")
        return {}

    g = Graph(S).flow(START >> charge, charge >> plain, plain >> END)
    with pytest.raises(CredentialsError, match="its roles: none"):
        g.invoke({}, credentials=provider())


def test_a_run_without_a_provider_says_to_pass_one() -> None:
    with pytest.raises(CredentialsError, match="got no credentials provider"):
        graph(charge).invoke({})


def test_a_provider_error_is_reported_without_its_message() -> None:
    class Vault(CredentialsProvider):
        def resolve(self, role: str) -> Any:
            raise LookupError(f"vault path billing={SECRET} sealed")

    with pytest.raises(CredentialsError, match="raised LookupError") as caught:
        graph(charge).invoke({}, credentials=Vault())
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None


def test_a_provider_without_the_role_and_one_returning_none_are_errors() -> None:
    with pytest.raises(CredentialsError, match="could not resolve role 'billing'"):
        graph(charge).invoke({}, credentials=CredentialsProvider({}))

    class Empty(CredentialsProvider):
        def resolve(self, role: str) -> Any:
            return None

    with pytest.raises(CredentialsError, match="returned None for role 'billing'"):
        graph(charge).invoke({}, credentials=Empty())


def test_credentials_must_be_a_provider() -> None:
    with pytest.raises(GraphConfigError, match="credentials= takes a CredentialsProvider"):
        graph(charge).invoke({}, credentials={"billing": SECRET})  # type: ignore[typeddict-item]


def test_roles_must_be_a_list_of_names() -> None:
    def f(state: S) -> dict[str, Any]:
        return {}

    with pytest.raises(GraphConfigError, match="roles= takes a list of role names"):
        node(f, roles="billing")
    with pytest.raises(GraphConfigError, match="declares the role ''"):
        node(f, roles=[""])
    assert node(f, roles=["b", "a", "b"]).roles == ("a", "b")


def test_credentials_never_print_pickle_or_copy() -> None:
    creds = Credentials("billing", SECRET)
    assert SECRET not in f"{creds} {creds!r} {creds:>40}"
    for how in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            how(creds)
    assert SECRET not in repr(provider())


def test_the_provider_resolves_a_role_once_per_call() -> None:
    asked: list[str] = []

    class Counting(CredentialsProvider):
        def resolve(self, role: str) -> Any:
            asked.append(role)
            return SECRET

    @node(roles=["billing"])
    def twice(state: S, ctx: NodeContext) -> dict[str, Any]:
        assert ctx.credentials("billing") is ctx.credentials("billing")
        return {}

    g = Graph(S).flow(START >> twice, twice >> charge, charge >> END)
    g.invoke({}, credentials=Counting())
    assert asked == ["billing"]


# -- no secret in any byte the stores write, in streams, logs or stored errors ----------


@node(roles=["billing"], retry=RetryPolicy(attempts=2, backoff=0))
def leaky(state: S, ctx: NodeContext) -> dict[str, Any]:
    """Every way a node might let its secret out through the engine."""
    creds = ctx.credentials("billing")
    ctx.emit(f"using {creds}")
    ctx.cache["seen"] = str(creds)
    if state.step == "retry" and ctx.attempt == 1:
        raise ConnectionError(f"token {creds.secret()} timed out")
    if state.step == "fail":
        raise PermissionError(f"token {creds.secret()} was refused")
    if state.step == "ask":
        answer = interrupt({"who": repr(creds)}, id="confirm")
        return {"note": f"{answer} with {creds}"}
    return {"note": f"ran with {creds}"}


def exercise(g: Graph[S], caught: list[str]) -> None:
    """Run ``g`` through completions, retries, pauses, failures and every stream mode."""
    creds = provider()
    for n in range(20):  # enough turns for checkpoints
        g.invoke({"step": "retry" if n % 2 else "run"}, thread_id="t", credentials=creds)
    modes = ["updates", "values", "custom", "debug"]
    for event in g.stream({"step": "retry"}, thread_id="t", stream_mode=modes, credentials=creds):
        caught.append(repr(event))
    caught.append(repr(g.invoke({"step": "ask"}, thread_id="t", credentials=creds)))
    caught.append(repr(g.invoke(None, thread_id="t", resume=Resume("ok"), credentials=creds)))
    for thread in ("f1", "f2"):
        # The node's own error, as it raised it, reaches the caller.
        with contextlib.suppress(PermissionError):
            g.invoke({"step": "fail"}, thread_id=thread, credentials=creds)
    caught.append(repr(anyio.run(g.get_state, "f1")))
    caught.append(repr(anyio.run(g.history, "t")))


def test_no_secret_reaches_the_file_store_streams_logs_or_stored_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = open_file(tmp_path / "history.jsonl")
    fake = FakeTime()
    g = Graph(S, state_store=store, clock=fake, sleep=fake.sleep)
    g.flow(START >> leaky, leaky >> END)
    caught: list[str] = []
    exercise(g, caught)
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"task_retried" in written and b"run_failed" in written and b"run_paused" in written
    assert b"Credentials(role='billing')" in written
    for secret in (SECRET, OTHER):
        assert secret.encode() not in written
        assert secret not in "\n".join(caught)
        assert secret not in caplog.text


def test_no_secret_reaches_the_memory_store_records() -> None:
    store = InMemoryStateStore()
    fake = FakeTime()
    g = Graph(S, state_store=store, clock=fake, sleep=fake.sleep)
    g.flow(START >> leaky, leaky >> END)
    caught: list[str] = []
    exercise(g, caught)
    stored = "".join(repr(records_sync(store, t)) for t in ("t", "f1", "f2"))
    assert "checkpoint" in stored and "**********" in stored
    assert SECRET not in stored
    assert SECRET not in "\n".join(caught)


def test_a_subgraph_node_gets_the_credentials_of_its_role_and_only_those() -> None:
    @node(roles=[])
    def plain(state: S, ctx: NodeContext) -> dict[str, Any]:
        ctx.credentials("billing")
        return {}

    child = Graph(S, name="child").flow(START >> charge, charge >> END)
    result = graph(child).invoke({}, credentials=provider())
    assert result.state.note == "charged with Credentials(role='billing')"
    refusing = Graph(S, name="refusing").flow(START >> plain, plain >> END)
    with pytest.raises(CredentialsError, match="its roles: none") as caught:
        graph(refusing).invoke({}, credentials=provider())
    assert caught.value.node == "plain"


def test_a_subgraph_resolves_a_role_once_per_call_with_its_parent() -> None:
    asked: list[str] = []

    class Counting(CredentialsProvider):
        def resolve(self, role: str) -> Any:
            asked.append(role)
            return SECRET

    child = Graph(S, name="child").flow(START >> charge, charge >> END)
    g = Graph(S).flow(START >> charge, charge >> child, child >> END)
    g.invoke({}, credentials=Counting())
    assert asked == ["billing"]


def test_no_secret_a_subgraph_node_was_given_reaches_the_parent_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = open_file(tmp_path / "history.jsonl")
    fake = FakeTime()
    child = Graph(S, name="child", clock=fake, sleep=fake.sleep).flow(START >> leaky, leaky >> END)
    g = Graph(S, state_store=store, clock=fake, sleep=fake.sleep).flow(START >> child, child >> END)
    caught: list[str] = []
    exercise(g, caught)
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"task_retried" in written and b"run_failed" in written and b"run_paused" in written
    assert b"Credentials(role='billing')" in written
    for secret in (SECRET, OTHER):
        assert secret.encode() not in written
        assert secret not in "\n".join(caught)
        assert secret not in caplog.text


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["invoke", "ainvoke", "stream", "astream"])
async def test_every_way_to_run_takes_credentials(method: str) -> None:
    g = graph(charge)
    if method == "invoke":
        state = await anyio.to_thread.run_sync(lambda: g.invoke({}, credentials=provider()).state)
    elif method == "ainvoke":
        state = (await g.ainvoke({}, credentials=provider())).state
    elif method == "stream":
        events = await anyio.to_thread.run_sync(
            lambda: list(g.stream({}, stream_mode=[], credentials=provider()))
        )
        state = events[-1].data.state
    else:
        events = [e async for e in g.astream({}, stream_mode=[], credentials=provider())]
        state = events[-1].data.state
    assert state.note == "charged with Credentials(role='billing')"


def test_a_provider_prints_its_roles_never_its_secrets() -> None:
    assert repr(provider()) == "CredentialsProvider(roles=['admin', 'billing'])"

    class Vault(CredentialsProvider):
        def resolve(self, role: str) -> Any:
            return SECRET

    assert repr(Vault()) == "Vault()"


# -- secrets are never pickled, never reachable outside the role, never in a chain -------


def test_a_provider_refuses_pickling_and_is_shared_not_copied() -> None:
    class Vault(CredentialsProvider):
        def __init__(self) -> None:
            super().__init__({"billing": SECRET})
            self.token = OTHER

    for made in (provider(), Vault()):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            with pytest.raises(TypeError, match="cannot be pickled") as caught:
                pickle.dumps(made, protocol=protocol)
            assert SECRET not in str(caught.value) and OTHER not in str(caught.value)
        assert copy.copy(made) is made and copy.deepcopy(made) is made
        assert copy.deepcopy({"p": made})["p"] is made


def _reachable(root: object, limit: int = 10_000) -> list[object]:
    """Every object reachable from ``root`` through attributes, slots and containers.

    Bound methods lead to their ``__self__``; a function's closure is not followed (see
    the ``NodeContext`` docstring: Python has no isolation inside a process).
    """
    seen: dict[int, object] = {}
    todo = [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen[id(obj)] = obj
        if isinstance(obj, str | bytes | int | float | bool) or obj is None:
            continue
        if isinstance(obj, dict):
            todo += [*obj.keys(), *obj.values()]
            continue
        if isinstance(obj, list | tuple | set | frozenset):
            todo += list(obj)
            continue
        if hasattr(obj, "__self__"):
            todo.append(obj.__self__)
        todo += list(getattr(obj, "__dict__", {}).values())
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                with contextlib.suppress(AttributeError):
                    todo.append(getattr(obj, name))
    return list(seen.values())


def test_no_attribute_path_leads_a_node_to_another_roles_credentials() -> None:
    held = provider()
    found: list[list[object]] = []

    @node(roles=["admin"])
    def takes_admin(state: S, ctx: NodeContext) -> dict[str, Any]:
        ctx.credentials("admin")
        return {}

    @node(roles=["billing"])
    def walker(state: S, ctx: NodeContext) -> dict[str, Any]:
        ctx.credentials("billing")
        assert not hasattr(ctx, "_resolved") and not hasattr(ctx, "_provider")
        found.append(_reachable(ctx))
        return {}

    g = Graph(S).flow(START >> takes_admin, takes_admin >> walker, walker >> END)
    g.invoke({}, credentials=held)
    (reached,) = found
    assert not any(obj is held for obj in reached)
    assert OTHER not in repr([o for o in reached if isinstance(o, str | dict)])
    assert not any(isinstance(o, Credentials) for o in reached)


def _chain(error: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while error is not None and error not in out:
        out.append(error)
        error = error.__cause__ or error.__context__
    return out


def test_a_provider_error_is_in_no_exception_chain_nor_the_stored_history() -> None:
    class Vault(CredentialsProvider):
        def resolve(self, role: str) -> Any:
            raise LookupError(f"vault path billing={SECRET} sealed")

    store = InMemoryStateStore()
    with pytest.raises(CredentialsError) as caught:
        graph(charge, store).invoke({}, thread_id="t", credentials=Vault())
    chain = _chain(caught.value)
    assert [type(e) for e in chain] == [CredentialsError]
    assert all(SECRET not in str(e) for e in chain)
    stored = repr(records_sync(store, "t"))
    assert "run_failed" in stored and SECRET not in stored
