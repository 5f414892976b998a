"""Where an OpenAPI operation's credentials go: its security scheme, read from the document.

The document says how a call authenticates (``components.securitySchemes`` and the
``security`` requirement of the operation or the document); the secret itself comes from
the role's credentials at call time, never from the document.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodestep._errors import CredentialsError

__all__ = ["Auth", "auth_of"]


@dataclass(frozen=True)
class Auth:
    """How a secret is sent: in a header or a query parameter, with a prefix.

    Attributes:
        place: ``"header"`` or ``"query"``.
        name: The header's or the query parameter's name.
        scheme: ``"bearer"``, ``"basic"`` or ``"key"`` (the secret as it is).
        tool: The tool's name, for errors.
    """

    place: str
    name: str
    scheme: str
    tool: str

    def apply(self, secret: Any, headers: dict[str, str], query: dict[str, Any]) -> list[str]:
        """Put ``secret`` into ``headers`` or ``query``; return the strings that hold it.

        A mapping is a set of headers, sent as they are. For Basic authentication a
        ``(user, password)`` pair is encoded; a string is taken as already encoded.

        Raises:
            CredentialsError: the secret is of a kind that cannot be sent (the message
                names its type only).
        """
        if isinstance(secret, Mapping):
            given = {str(k): str(v) for k, v in secret.items()}
            for key, text in given.items():
                self._check_header(key)
                self._check_header(text)
            headers.update(given)
            return list(given.values())
        if self.scheme == "basic" and isinstance(secret, tuple) and len(secret) == 2:
            secret = base64.b64encode(f"{secret[0]}:{secret[1]}".encode()).decode()
        if isinstance(secret, bytes):
            secret = secret.decode()
        if not isinstance(secret, str):
            raise CredentialsError(
                f"Tool {self.tool!r} got credentials of type {type(secret).__name__}; an "
                f"OpenAPI tool sends a string (a token or key), a (user, password) pair for "
                f"Basic, or a dict of headers. Make the provider's resolve() return one.",
                node=self.tool,
            )
        value = {"bearer": f"Bearer {secret}", "basic": f"Basic {secret}"}.get(self.scheme, secret)
        if self.place == "header":
            self._check_header(value)
            headers[self.name] = value
        else:  # a query parameter is percent-encoded: any character can be sent
            query[self.name] = value
        return [secret, value]

    def _check_header(self, text: str) -> None:
        """Refuse what an HTTP header cannot carry, before httpx meets it.

        Why here: httpx raises ``UnicodeEncodeError`` for a non-ASCII header, and its
        message quotes the character and its position, which would reach the tool
        message and the history. This message names neither.
        """
        if text.isascii() and text.isprintable():
            return
        raise CredentialsError(
            f"Tool {self.tool!r} got credentials that an HTTP header cannot carry: a "
            f"header holds printable ASCII only (no accents, other scripts or line "
            f"breaks). Make the provider's resolve() return the token as the API issued "
            f"it, or encode it as the API expects.",
            node=self.tool,
        )


def auth_of(document: Mapping[str, Any], operation: Mapping[str, Any], tool: str) -> Auth:
    """Return how ``operation`` authenticates; ``Authorization: Bearer`` when it does not say."""
    requirements = operation.get("security", document.get("security")) or ()
    schemes = (document.get("components") or {}).get("securitySchemes") or {}
    for requirement in requirements:
        for name in requirement if isinstance(requirement, Mapping) else ():
            scheme = schemes.get(name)
            if isinstance(scheme, Mapping):
                return _auth(scheme, tool)
    return Auth("header", "Authorization", "bearer", tool)


def _auth(scheme: Mapping[str, Any], tool: str) -> Auth:
    kind = scheme.get("type")
    if kind == "apiKey" and scheme.get("in") in ("header", "query") and scheme.get("name"):
        return Auth(str(scheme["in"]), str(scheme["name"]), "key", tool)
    if kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
        return Auth("header", "Authorization", "basic", tool)
    # http bearer, oauth2 and openIdConnect all send a bearer token.
    return Auth("header", "Authorization", "bearer", tool)
