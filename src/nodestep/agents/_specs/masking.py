"""Keep the call's context out of everything an agent stores.

``context=`` is call-time data: no byte of it may reach a store. The agent's own writes
never hold it, but text made by code that saw it can: a tool's result or error, a
function's output, a failure's message. ``Masks`` holds the context's texts for one step
(set by ``Agent.step`` and ``Agent.stream`` with ``masked``, in a context variable, so
concurrent steps of one agent each mask their own) and ``mask`` replaces them in a text
before the text is stored. The agent's graph run without a step (by a server, a worker or
the user's own code) masks the context each node is called with (``masking``).

What is masked:

- every string and number of the context, and how each other value that prints itself
  prints (``texts_of``: the whole context, each value also in the escaped forms stored
  text shows it in, JSON and ``repr``) by ``MASK``;
- the credentials the run's nodes were given, by ``**********``, in every form the
  engine masks them in a run's failure event (``_engine.redact``). A ``Masks`` keeps the
  run's own dict of them, which fills as nodes ask, so a failure recorded after the run
  (``Agent._failed``) masks them too.

Both are masked in text, and in an ``interrupt()``'s payload before the engine stores the
pause.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, TypeVar

from pydantic import BaseModel, SecretBytes, SecretStr

from nodestep._engine.interrupts import GraphInterrupt, Interrupt, current_task
from nodestep._engine.redact import mask as mask_secrets
from nodestep._engine.redact import parts_of, secret_texts
from nodestep._errors import GraphConfigError

__all__ = ["MASK", "Masks", "mask", "masked", "masking", "texts_of"]

MASK = "[context]"
"""What stands in stored text for a value of the call's context."""

_SHORTEST = 4  # a shorter value ("en", 7) is everywhere in text; masking it would garble
_MOST = 100_000  # values in a context, at most: a larger one is refused, never half masked


class Masks:
    """The texts of one call's context, longest first, and the credentials of its runs.

    Args:
        texts: The texts to mask.
    """

    __slots__ = ("credentials", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        # Each run's credentials by role: the engine's own dict, kept and not copied, so a
        # role a node resolves later is masked too (``given``).
        self.credentials: list[dict[str, Any]] = []

    def given(self, resolved: dict[str, Any]) -> None:
        """Mask the credentials of ``resolved`` (a run's, by role) too, as it fills."""
        for known in self.credentials:  # a loop, not any(): each node of a step asks
            if known is resolved:
                return
        self.credentials.append(resolved)

    def apply(self, text: str) -> str:
        """Return ``text`` with each credential replaced by ``**********`` (in each of its
        forms), then each of the texts by ``MASK``."""
        # list(): a tool in a worker thread may resolve a role while this runs.
        secrets = [c.secret() for run in self.credentials for c in list(run.values())]
        if secrets:  # first, as the engine's failure event masks them
            text = mask_secrets(text, secret_texts(secrets, plain=True))
        for secret in self.texts:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def apply_data(self, data: Any) -> Any:
        """Return JSON data with its strings masked, and a number whose text is masked as
        ``MASK``."""
        if isinstance(data, str):
            return self.apply(data)
        if isinstance(data, dict):
            return {self.apply_data(k): self.apply_data(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.apply_data(item) for item in data]
        if isinstance(data, int | float) and not isinstance(data, bool):
            return data if self.apply(str(data)) == str(data) else MASK
        return data


_NONE = Masks([])
_CURRENT: ContextVar[Masks] = ContextVar("nodestep_agent_masks", default=_NONE)
# The default is never changed in place: a step sets a Masks of its own.


class masked:  # named as the function it replaces: ``with masked(masks):``
    """Mask ``masks``' texts in what the code inside stores, and in the runs it starts
    (their tasks copy the context variables).

    A class rather than a ``@contextmanager`` generator, as ``contextlib.suppress`` is:
    the generator's helper, its context manager's ``__init__`` and the ``StopIteration``
    that ends it cost each step of an agent (W10) about 0.3% of its instructions.
    """

    __slots__ = ("_masks", "_token")

    def __init__(self, masks: Masks) -> None:
        self._masks = masks

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self._masks)

    def __exit__(self, *_: object) -> None:
        _CURRENT.reset(self._token)


T = TypeVar("T")


def masking(
    node_fn: Callable[..., Awaitable[T]], context_of: Callable[[Any], Any]
) -> Callable[..., Awaitable[T]]:
    """Return ``node_fn`` masking the context it is called with, when no step set masks.

    ``context_of(ctx)`` reads a node call's context. Why here and not only in the step:
    a served agent's runs (and a worker's, and ``agent.graph.invoke``) never pass through
    ``Agent.step``, and the context must stay out of their stores too.

    The masks also get the run's credentials (the engine's dict of them, which its
    failure event masks; a node's context hides it by design, so it is read from the
    task's scope), and an ``interrupt()``'s payload is masked before the engine stores it.
    """

    @functools.wraps(node_fn)
    async def masked_node(state: Any, ctx: Any, **more: Any) -> T:
        masks = _CURRENT.get()
        token = None
        if masks is _NONE:  # else a step's, which masks its whole run
            masks = Masks(texts_of(context_of(ctx)))
            # Set only here: a step's masks are the current ones already, and setting
            # and resetting them again cost every node of an agent's turn a context
            # manager (W10: 3 a turn).
            token = _CURRENT.set(masks)
        scope = current_task.get()
        if scope is not None:
            masks.given(scope.runtime.resolved)
        try:
            return await node_fn(state, ctx, **more)
        except GraphInterrupt as pause:
            pause.pending = _masked_pause(masks, pause.pending)
            pause.more = tuple(_masked_pause(masks, other) for other in pause.more)
            raise
        finally:
            if token is not None:
                _CURRENT.reset(token)

    return masked_node


def _masked_pause(masks: Masks, pending: Interrupt) -> Interrupt:
    if not masks.texts and not masks.credentials:
        return pending
    return dataclasses.replace(pending, payload=masks.apply_data(pending.payload))


def texts_of(context: Any) -> list[str]:
    """Return the texts that mask ``context``'s values, longest first.

    Each string and number of ``_SHORTEST`` characters or more, as it is and in the forms
    stored text may show it: JSON-escaped (a tool's dict result) and ``repr``-escaped (an
    error made with ``{value!r}``). The whole context is walked, each object once: dict
    values (not keys: names the code chose), lists, tuples, sets, pydantic models (fields
    and extras), dataclasses, ``SecretStr`` and ``SecretBytes``, bytes (as UTF-8), an enum
    member's value, and any other object's public attributes (what injection reads with
    ``user.token``), read from its ``__dict__`` and slots so that no property runs.
    Private attributes are left out: a library object in the context (a client, a
    connection) keeps its machinery there, and masking its strings would garble every
    stored text. Such an object that prints itself (a UUID, a date, a ``Decimal``, an
    enum member, a path) is masked as it prints too (``_printed``).

    Why whole: a value left out is a value stored. 10,000 values take about 10 ms, once
    per step; a context of more than ``_MOST`` values is refused rather than masked in part.

    Raises:
        GraphConfigError: the context holds more than ``_MOST`` values.
    """
    if type(context) is dict and not context:
        return []  # the usual context, none: what the walk below gives it, at no walk
    found: set[str] = set()
    todo = [context]
    walked: set[int] = set()  # the objects already walked: a cycle ends, a shared one counts once
    seen = 0
    while todo:
        value = todo.pop()
        seen += 1
        if seen > _MOST:
            raise GraphConfigError(
                f"The call's context holds more than {_MOST:,} values. An agent masks each "
                f"of them in what it stores, and refuses a larger context rather than store "
                f"some of it. Pass only what the step's nodes read (ids, not the records "
                f"they name), and let a tool look up the rest."
            )
        kind = type(value)  # the exact types first: most of a large context is these
        if kind is str or kind is int or kind is float:
            text = value if kind is str else str(value)
        elif isinstance(value, _SCALARS):
            text = _text(value)
        else:
            if value is not None and id(value) not in walked:
                walked.add(id(value))
                todo.extend(parts_of(value, public=True))
                if isinstance(value, enum.Enum):  # its value is in a private attribute
                    todo.append(value.value)
                found.update(t for t in _printed(value) if len(t) >= _SHORTEST)
            continue
        if len(text) >= _SHORTEST:
            found.add(text)
    texts = set(found)
    for text in found:
        if not (text.isascii() and text.isprintable() and '"' not in text and "\\" not in text):
            texts.update(_escaped(text))
    return sorted(texts, key=len, reverse=True)


_SCALARS = (str, bytes, int, float, SecretStr, SecretBytes)


def _text(value: str | bytes | int | float | SecretStr | SecretBytes) -> str:
    """Return the text of a scalar that is not exactly a ``str``, ``int`` or ``float``."""
    if isinstance(value, SecretStr | SecretBytes):
        value = value.get_secret_value()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, bool):
        return ""
    # A subclass's value, not its own str(): a str enum member prints as "Tier.GOLD".
    if isinstance(value, str):
        return str.__str__(value)
    return int.__repr__(value) if isinstance(value, int) else float.__repr__(value)


_SHOWN_BY_PARTS = (Mapping, list, tuple, set, frozenset, BaseModel)


def _printed(value: Any) -> tuple[str, ...]:
    """Return how ``value`` prints, if its type prints it (its own ``__str__`` or
    ``__repr__``): its ``str()``, and its ``repr()`` if that is its type's own too.

    Why: a value such as a UUID, a ``Decimal`` or a date holds its text in no attribute
    the walk reads, and a node shows it with ``f"{value}"``. A container, a model or a
    dataclass prints its parts, which the walk masks one by one. A ``__str__`` or
    ``__repr__`` that raises gives nothing: its public attributes are still masked.
    """
    kind: Any = type(value)  # Any: mypy reads kind.__str__ as a bound method
    own_repr = kind.__repr__ is not object.__repr__
    if not own_repr and kind.__str__ is object.__str__:
        return ()
    if isinstance(value, _SHOWN_BY_PARTS) or dataclasses.is_dataclass(value):
        return ()
    shown: list[str] = []
    for show in (str, repr) if own_repr else (str,):
        try:
            shown.append(show(value))
        except Exception:  # the context's own object, broken: the step must still run
            continue
    return tuple(shown)


def _escaped(text: str) -> tuple[str, ...]:
    """Return ``text`` JSON-escaped (both ways of writing non-ASCII) and ``repr``-escaped."""
    ascii_json, utf8_json = encode_basestring_ascii(text), encode_basestring(text)
    return ascii_json[1:-1], utf8_json[1:-1], repr(text)[1:-1]


def mask(text: str) -> str:
    """Return ``text`` with the running step's context values replaced by ``MASK``."""
    return _CURRENT.get().apply(text)
