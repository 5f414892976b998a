"""The error for an option a store's class does not take, as ``open_store`` and
``open_memory`` raise it: one text for both, which live in layers that may not import
each other."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = ["unknown_store_option"]


def unknown_store_option(
    call: str, name: str, store: tuple[str, type], taken: Sequence[str], url_gives: str
) -> TypeError:
    """Return the ``TypeError`` for the option ``name=`` given to ``call``.

    Args:
        call: The call as the message shows it, e.g. ``open_store('h.db')`` (without a
            password: the caller hides it).
        name: The option the store does not take.
        store: The kind of store, as a message names it, and its class.
        taken: The options it takes.
        url_gives: What the URL gives the store (``path`` or ``dsn``), for ``path=`` and
            ``dsn=``, which the URL already gives.

    Why a ``TypeError``: it is what Python raises for an unknown keyword argument, so code
    that catches it keeps working; only the message says more.
    """
    kind, cls = store
    if name in ("path", "dsn"):
        fix = f"The URL gives the store its {url_gives}: leave {name}= out."
    else:
        close = difflib.get_close_matches(name, list(taken), n=1)
        fix = f"Did you mean {close[0]}=?" if close else "Leave it out."
    takes = ", ".join(f"{k}=" for k in taken) or "no options"
    return TypeError(
        f"{call} got the option {name}=, which {kind} ({cls.__name__}) does not take. "
        f"It takes {takes}. {fix}"
    )
