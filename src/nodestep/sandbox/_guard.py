"""The guard of every page under ``/ui``: Host, Origin, the token cookie and CSRF.

Why each check, as for the API (``nodestep.serve``):

- **Host**: a page elsewhere can point a name it controls at ``127.0.0.1`` (DNS
  rebinding); pages answer only the names the server was told about.
- **Origin**: a page the user visits must not post forms to the sandbox. A request whose
  ``Origin`` is not the sandbox's own address is refused.
- **Token**: off loopback the server has a token. A browser cannot add a header to a
  link, so the token comes once, in ``?token=`` or the login form, and is kept in an
  ``HttpOnly``, ``SameSite=Strict`` cookie holding a keyed hash of it (never the token).
- **CSRF**: every form carries a token made from a secret drawn when the process starts;
  a POST without it is refused, so a form on another site cannot drive the sandbox even
  where a browser sends the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from urllib.parse import parse_qsl, quote, unquote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["COOKIE", "Guard", "host_name"]

COOKIE = "nodestep_ui"
"""The cookie that holds the keyed hash of the token."""

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def host_name(host: str) -> str:
    """Return the name of a ``Host`` header, without its port."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0].lower()


def _cookies(headers: dict[bytes, bytes]) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        name, eq, value = part.strip().partition("=")
        if eq:
            found[name] = value
    return found


async def _answer(
    send: Send, status: int, body: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    data = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _asked(scope: Scope, query: list[tuple[str, str]]) -> str:
    """Return the page asked for, as a path and query to go back to after the login.

    The path as it came (``%2F`` in a thread's id stays one segment), and the query
    without its ``token``: a token never stays in an address, right or wrong.
    """
    raw = scope.get("raw_path")
    path = raw.split(b"?", 1)[0].decode("latin-1") if raw else ""
    if unquote(path) != scope["path"]:  # no raw path, or not this one's
        path = quote(scope["path"])
    rest = urlencode([(k, v) for k, v in query if k != "token"])
    return path + (f"?{rest}" if rest else "")


class Guard:
    """ASGI middleware in front of the pages: checks Host, Origin, token and CSRF.

    Args:
        app: The pages.
        token: The token a browser must present once, or ``None`` for none.
        hosts: Host names (without port) served besides localhost ones; ``"*"`` for any.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: Sequence[str]) -> None:
        self.app = app
        self.secret = secrets.token_bytes(32)
        self.token = token
        self.hosts = frozenset(h.lower() for h in hosts) | _LOCAL_HOSTS
        self.csrf = hmac.new(self.secret, b"csrf", hashlib.sha256).hexdigest()
        self.cookie = (
            hmac.new(self.secret, token.encode(), hashlib.sha256).hexdigest() if token else ""
        )

    def token_matches(self, given: str) -> bool:
        """Tell whether ``given`` is the server's token (in constant time)."""
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_matches(self, given: str) -> bool:
        """Tell whether a form's ``csrf`` field is this process's CSRF token."""
        return hmac.compare_digest(given.encode(), self.csrf.encode())

    def set_cookie(self) -> tuple[bytes, bytes]:
        """Return the ``Set-Cookie`` header that lets this browser in."""
        value = f"{COOKIE}={self.cookie}; Path=/ui; HttpOnly; SameSite=Strict"
        return (b"set-cookie", value.encode())

    def _allowed_origin(self, origin: str, host: str) -> bool:
        return origin in (f"http://{host}", f"https://{host}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.admit(self.app, scope, receive, send)

    async def admit(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request to ``app`` if it passes the checks; answer it otherwise."""
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if "*" not in self.hosts and host_name(host) not in self.hosts:
            await _answer(send, 400, "The Host header names a host this server does not serve.")
            return
        origin = headers.get(b"origin", b"").decode("latin-1")
        if origin and not self._allowed_origin(origin, host):
            await _answer(send, 403, "A page of another site may not use the sandbox.")
            return
        scope.setdefault("state", {})["csrf"] = self.csrf
        open_path = scope["path"] == "/ui/login" or scope["path"].startswith("/ui/static/")
        if self.token is None or open_path:
            await app(scope, receive, send)
            return
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        query = dict(pairs)
        if "token" in query and self.token_matches(query["token"]):
            # The token leaves the address bar at once: a redirect to the same page.
            where = _asked(scope, pairs).encode("latin-1")
            await _answer(send, 303, "", [(b"location", where), self.set_cookie()])
            return
        given = _cookies(headers).get(COOKIE, "")
        if self.cookie and hmac.compare_digest(given.encode(), self.cookie.encode()):
            await app(scope, receive, send)
            return
        # Back to the page asked for, query and all; the login form keeps only a page of
        # the sandbox as where to go (``same_site_page``), whatever the address says.
        target = urlencode({"next": _asked(scope, pairs)})
        await _answer(send, 303, "", [(b"location", f"/ui/login?{target}".encode())])
