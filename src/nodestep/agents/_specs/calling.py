"""How a spec's Python function is called: its arguments, injected values, credentials.

A function gets, by parameter name: the checked arguments of a tool call (a ToolNode),
or the node's input as its first other parameter (a FunctionNode or Node); the values
its service account injects from the call's context (``user_id: user.id`` gives
``user_id``, ``organization.id`` gives ``organization={'id': ...}``). A parameter
annotated ``NodeContext`` gets the node's context (``ctx.credentials(role)``), and one
annotated ``Credentials`` the credentials of the account's only provider. A plain
``def`` runs in a worker thread, so the tool calls of one reply run side by side, unless
the caller says it may run inline (a reply's only call: nothing runs beside it, and a
thread hop costs more than a quick tool).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import orjson
from pydantic import BaseModel

from nodestep._errors import ContextNotProvidedError, GraphConfigError
from nodestep._flow.credentials import Credentials
from nodestep._flow.nodes import NodeContext
from nodestep.agents._specs.kinds import AccountSpec

__all__ = ["Caller", "injected", "to_text"]


class Caller:
    """Calls one function with what its parameters ask for.

    Args:
        fn: The function.
        node: The node's name, for errors.
        account: The node's service account, or ``None``.
    """

    def __init__(self, fn: Callable[..., Any], node: str, account: AccountSpec | None) -> None:
        self.fn = fn
        self.node = node
        self.account = account
        self.is_async = inspect.iscoroutinefunction(fn)
        params = inspect.signature(fn).parameters.values()
        self.names = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        self.open = any(p.kind == p.VAR_KEYWORD for p in params)
        self.ctx = next((p.name for p in params if _is(p, NodeContext)), None)
        self.creds = next((p.name for p in params if _is(p, Credentials)), None)
        taken = {self.ctx, self.creds} | {t.split(".")[0] for t, _ in self._inject()}
        self.first = next(
            (
                p.name
                for p in params
                if p.name not in taken and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ),
            None,
        )

    def _inject(self) -> list[tuple[str, str]]:
        return self.account.inject if self.account is not None else []

    async def call(self, kwargs: dict[str, Any], ctx: NodeContext, *, inline: bool = False) -> Any:
        """Call the function with ``kwargs`` (those it takes) and what it asks for.

        Args:
            kwargs: The arguments (those the function does not take are dropped).
            ctx: The node's context.
            inline: Call a plain ``def`` on the event loop's thread, not in a worker thread.

        Raises:
            ContextNotProvidedError: a strict account's injected value is not in the
                call's context.
            CredentialsError: its credentials cannot be given.
            Exception: whatever the function raises.
        """
        args = {k: v for k, v in kwargs.items() if self.open or k in self.names}
        args.update(injected(self.account, ctx, self.node))
        if self.ctx is not None:
            args[self.ctx] = ctx
        if self.creds is not None:
            args[self.creds] = self._credentials(ctx)
        # The input goes by position: a builtin such as str.upper takes it no other way.
        first = (args.pop(self.first),) if self.first in args else ()
        if self.is_async:
            return await self.fn(*first, **args)
        if inline:
            return self.fn(*first, **args)
        # Abandoned (left to finish alone) on a cancellation, so a timeout stops waiting for
        # it at the limit, as the engine abandons its own workers.
        return await anyio.to_thread.run_sync(
            lambda: self.fn(*first, **args), abandon_on_cancel=True
        )

    def _credentials(self, ctx: NodeContext) -> Credentials:
        providers = self.account.providers if self.account is not None else ()
        if len(providers) != 1:
            raise GraphConfigError(
                f"The func of '{self.node}' takes a Credentials parameter, which needs a "
                f"service account with one credentials_provider (it has {len(providers)}); "
                f"take a NodeContext and call ctx.credentials(role) instead."
            )
        return ctx.credentials(providers[0])


def _is(param: inspect.Parameter, cls: type) -> bool:
    return param.annotation is cls or param.annotation == cls.__name__


def injected(account: AccountSpec | None, ctx: NodeContext, node: str) -> dict[str, Any]:
    """Return the values ``account`` injects from the call's context, as keyword arguments.

    Raises:
        ContextNotProvidedError: a value of a strict account is missing; the message
            names the path, never a value.
    """
    if account is None or not account.inject:
        return {}
    context = ctx.context
    out: dict[str, Any] = {}
    for target, source in account.inject:
        value: Any = context
        for part in source.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
        if value is None:
            if account.strict:
                raise ContextNotProvidedError(
                    f"ServiceAccount '{account.name}' of '{node}' injects '{source}' from "
                    f"the call's context, which has no such value. Pass it in step(..., "
                    f"context=...), or set 'strict: false' in the account's context."
                )
            continue
        parts = target.split(".")
        place = out
        for part in parts[:-1]:
            place = place.setdefault(part, {})
        place[parts[-1]] = value
    return out


def to_text(value: Any) -> str:
    """Return a function's result as the text a model or the next node reads.

    Text is itself, and so are UTF-8 bytes (an HTTP body such as ``response.content``),
    which would otherwise read as their repr, ``"b'...'"``. A pydantic model is its JSON,
    and anything else is JSON, a value without a JSON form (other bytes) as its ``str``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            pass
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return orjson.dumps(value, default=str).decode()
