"""Roles and credentials: a node declares roles, a provider given at call time resolves them.

A node lists the roles it acts in (``@node(roles=["billing"])``). The caller passes a
``CredentialsProvider`` to ``invoke(..., credentials=provider)``; when the node asks
(``ctx.credentials("billing")``), the provider resolves the role and the node gets a
``Credentials`` object. The secret lives only in that object, for the call: it is never
part of the state, the history, a stream event or an error message, and its ``repr`` and
``str`` show the role alone. A node that asks for a role it did not declare gets a
``CredentialsError`` naming the role, so a node sees only the credentials of its own roles.

The provider and the call's resolved credentials are held in a closure (``role_lookup``),
not on the node's context: no attribute of ``NodeContext`` leads to another role's
secret. (Python has no isolation inside a process; code that introspects closures or the
garbage collector can reach anything. The rule keeps a secret from travelling by
accident, e.g. with a context passed to a library.) A provider refuses pickling, and a
provider's own error never reaches an exception chain: it may quote what it looked up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from nodestep._errors import CredentialsError, GraphConfigError

__all__ = ["Credentials", "CredentialsProvider", "check_roles", "resolve_role", "role_lookup"]

_ROLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")


class Credentials:
    """The credentials of one role, as a node gets them; they never print.

    ``repr``, ``str`` and ``format`` show the role only; ``secret()`` returns the value the
    provider gave. Pickling and copying are refused, so a credential cannot travel into a
    stored value or another process by accident.

    Attributes:
        role: The role the credentials are for.
    """

    __slots__ = ("_secret", "role")

    def __init__(self, role: str, secret: Any) -> None:
        self.role = role
        self._secret = secret

    def secret(self) -> Any:
        """Return the secret the provider resolved for the role (a token, a key, a dict)."""
        return self._secret

    def __repr__(self) -> str:
        return f"Credentials(role={self.role!r})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"{self!r} cannot be pickled or copied: credentials stay in the node that asked "
            f"for them. Pass the role's name instead, and ask ctx.credentials(role) again."
        )


class CredentialsProvider:
    """Resolve a role to its credentials, when a node that declares the role asks.

    Use it as it is with a mapping of roles to secrets, or subclass it and override
    ``resolve`` to fetch them (from a vault, a cloud's role assumption, the environment).
    Pass it to a call: ``graph.invoke(input, credentials=provider)``; it is never stored,
    so pass it again when you resume or continue a thread.

    A provider is never pickled (``pickle.dumps`` raises ``TypeError``), so its secrets
    cannot reach a file, a cache or another process by accident; ``copy.copy`` and
    ``copy.deepcopy`` return the provider itself, so a copied configuration shares it
    rather than duplicating the secrets.

    Args:
        secrets: Secrets by role, for the default ``resolve``.
    """

    def __init__(self, secrets: Mapping[str, Any] | None = None) -> None:
        self._secrets = dict(secrets or {})

    def resolve(self, role: str) -> Any:
        """Return the secret for ``role``; called in the node's task, once per task and role.

        Args:
            role: A role the asking node declared.

        Returns:
            The secret: any value (a string, bytes, a dict of headers, a token object).

        Raises:
            LookupError: the provider has nothing for the role.
        """
        try:
            return self._secrets[role]
        except KeyError:
            raise LookupError(f"no credentials for role {role!r}") from None

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} cannot be pickled: it holds secrets, which never leave "
            f"the process in plain text. Make the provider where the graph runs (in each "
            f"worker process), and pass it to the call there."
        )

    def __reduce__(self) -> NoReturn:
        self.__reduce_ex__(0)

    def __copy__(self) -> CredentialsProvider:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> CredentialsProvider:
        return self

    def __repr__(self) -> str:
        # The roles only: a provider printed in a log or an error must not show its secrets.
        if not self._secrets:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(roles={sorted(self._secrets)!r})"


def check_roles(roles: Any, node: str) -> tuple[str, ...]:
    """Return a node's declared roles, sorted and without repeats.

    Raises:
        GraphConfigError: ``roles`` is not a list of role names.
    """
    if isinstance(roles, str) or not isinstance(roles, Iterable):
        raise GraphConfigError(
            f"Node '{node}' got roles={roles!r}; roles= takes a list of role names, even for "
            f"one: @node(roles=['billing'])."
        )
    out = set()
    for role in roles:
        if not isinstance(role, str) or not _ROLE.match(role):
            raise GraphConfigError(
                f"Node '{node}' declares the role {role!r}; a role is a name of letters, "
                f"digits and _ . : / -, starting with a letter or digit, e.g. 'billing'."
            )
        out.add(role)
    return tuple(sorted(out))


def resolve_role(
    provider: CredentialsProvider | None, node: str, roles: tuple[str, ...], role: Any
) -> Credentials:
    """Return the credentials of ``role`` for ``node``, refusing what the node may not see.

    Messages name the role and the node, never a secret: the provider's own error is
    chained as the cause only by its type, not its text.

    Raises:
        CredentialsError: the role is not one of the node's, the call has no provider, or
            the provider cannot resolve it.
    """
    if role not in roles:
        declared = ", ".join(repr(r) for r in roles) or "none"
        raise CredentialsError(
            f"Node '{node}' asked for the credentials of role {role!r}, which it does not "
            f"declare (its roles: {declared}). A node sees only its own roles' credentials; "
            f"add the role to @node(roles=[...]) if the node needs it.",
            node=node,
            role=str(role),
        )
    if provider is None:
        raise CredentialsError(
            f"Node '{node}' asked for the credentials of role {role!r}, but the call got no "
            f"credentials provider. Pass credentials=CredentialsProvider(...) to "
            f"invoke/ainvoke/stream/astream (and again when resuming: it is never stored).",
            node=node,
            role=role,
        )
    failed = ""
    try:
        secret = provider.resolve(role)
    except Exception as error:
        failed = type(error).__name__
    if failed:
        # Raised outside the except block, so the provider's error is not even the
        # __context__: its message may quote what it looked up. Only its type is named.
        raise CredentialsError(
            f"The credentials provider could not resolve role {role!r} for node '{node}': it "
            f"raised {failed}. Check that {type(provider).__name__} has credentials for the "
            f"role.",
            node=node,
            role=role,
        )
    if secret is None:
        raise CredentialsError(
            f"The credentials provider returned None for role {role!r} of node '{node}'. "
            f"Return the role's secret, or raise LookupError when there is none.",
            node=node,
            role=role,
        )
    return Credentials(role, secret)


def role_lookup(
    provider: CredentialsProvider | None,
    node: str,
    roles: tuple[str, ...],
    resolved: dict[str, Credentials] | None = None,
) -> Callable[[str], Credentials]:
    """Return what ``ctx.credentials`` calls for one task of ``node``.

    Why a closure: the provider and ``resolved`` (the call's credentials of every role,
    shared by its tasks so a role resolves once per call) must not be attributes of the
    node's context, where any node could read every role's secret.

    Args:
        provider: The call's provider, or ``None``.
        node: The node's name.
        roles: The roles the node declares.
        resolved: The call's credentials by role; ``None`` for a fresh dict.
    """
    shared: dict[str, Credentials] = {} if resolved is None else resolved

    def lookup(role: str) -> Credentials:
        # The role check comes first: another node of the call may have resolved the role.
        found = shared.get(role) if role in roles else None
        if found is None:
            found = resolve_role(provider, node, roles, role)
            shared[role] = found
        return found

    return lookup
