"""The gate every request passes: Host, Origin (CORS), token and body size.

Why each check:

- **Host**: a web page can make a browser send requests to ``127.0.0.1`` under a name
  it controls (DNS rebinding); a server that answers only its own names is out of reach.
- **Origin**: a page the user visits must not drive the local server. Requests with an
  ``Origin`` header are refused unless it is a localhost origin or one the operator
  allowed; allowed ones get CORS headers, and a preflight is answered without a token
  (browsers never send one with it).
- **Token**: off 127.0.0.1 anyone on the network could run the graphs; the token is
  compared in constant time (``hmac.compare_digest``), from ``x-api-key`` or
  ``Authorization: Bearer``.
- **Body size**: a body past the limit is refused before it is read whole.
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Sequence

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodestep import GraphConfigError
from nodestep.serve._bodies import ApiError

__all__ = ["Gate", "bind_access", "local_origin"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_LOCAL_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$")
_ALLOW_HEADERS = b"content-type, x-api-key, authorization, last-event-id, accept, cache-control"
_METHODS = b"GET, POST, PUT, PATCH, DELETE, OPTIONS"


def bind_access(host: str, token: str | None) -> tuple[str | None, list[str]]:
    """The token and the extra Host names of a server bound to ``host``.

    Off loopback, anyone who reaches the port could run the graphs and read every thread,
    so a token is required there; the Host check then takes any name (``["*"]``), since
    the token guards the server. On loopback the token is optional and the Host check
    keeps its local names.

    Args:
        host: The address the server binds.
        token: The API token; ``None`` (or empty) reads ``NODESTEP_API_TOKEN``.

    Returns:
        The token (``None`` when there is none) and the Host names for ``create_app(hosts=)``.

    Raises:
        GraphConfigError: ``host`` is not a loopback address and there is no token.
    """
    token = token or os.environ.get("NODESTEP_API_TOKEN") or None
    if host in _LOOPBACK:
        return token, []
    if token is None:
        raise GraphConfigError(
            f"Serving on {host!r} lets anyone on the network run the graphs and read the "
            f"threads; give a token (--token or NODESTEP_API_TOKEN), or bind 127.0.0.1."
        )
    return token, ["*"]


def local_origin(origin: str) -> bool:
    """Tell whether an ``Origin`` is a page served from this machine."""
    return bool(_LOCAL_ORIGIN.match(origin))


async def _refuse(
    send: Send, status: int, detail: str, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = orjson.dumps({"detail": detail})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra]})
    await send({"type": "http.response.body", "body": body})


class Gate:
    """ASGI middleware: checks a request's Host, Origin, token and size before the app.

    Args:
        app: The app behind the gate.
        token: The token requests must carry, or ``None`` for none.
        hosts: Host names (without port) the server answers to; ``"*"`` for any.
        origins: Browser origins allowed besides localhost ones; ``"*"`` for any.
        max_body: The largest request body, in bytes.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        hosts: Sequence[str],
        origins: Sequence[str],
        max_body: int,
    ) -> None:
        self._app = app
        self._token = token.encode() if token else None
        self._hosts = frozenset(h.lower() for h in hosts) | _LOCAL_HOSTS
        self._origins = frozenset(o.rstrip("/") for o in origins)
        self._max_body = max_body

    def _origin_allowed(self, origin: str) -> bool:
        return "*" in self._origins or origin in self._origins or local_origin(origin)

    def _host_allowed(self, host: str) -> bool:
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return "*" in self._hosts or name.lower() in self._hosts

    def _token_ok(self, headers: dict[bytes, bytes]) -> bool:
        if self._token is None:
            return True
        given = headers.get(b"x-api-key", b"")
        bearer = headers.get(b"authorization", b"")
        if bearer[:7].lower() == b"bearer ":
            given = given or bearer[7:].strip()
        return hmac.compare_digest(given, self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if not self._host_allowed(headers.get(b"host", b"").decode("latin-1")):
            await _refuse(send, 400, "The Host header names a host this server does not answer to.")
            return
        origin = headers.get(b"origin", b"").decode("latin-1")
        cors: list[tuple[bytes, bytes]] = []
        if origin:
            if not self._origin_allowed(origin):
                await _refuse(
                    send,
                    403,
                    f"Origin {origin!r} is not allowed; start the server with "
                    f"--cors-origin {origin}.",
                )
                return
            cors = [
                (b"access-control-allow-origin", origin.encode()),
                (b"access-control-allow-credentials", b"true"),
                (
                    b"access-control-expose-headers",
                    b"content-location, location, x-pagination-next, x-pagination-total",
                ),
                (b"vary", b"origin"),
            ]
            if scope["method"] == "OPTIONS":
                await self._preflight(send, cors)
                return
        if scope["path"] != "/ok" and not self._token_ok(headers):
            await _refuse(
                send,
                401,
                "Missing or wrong API token: send it as x-api-key or Authorization: Bearer.",
                cors,
            )
            return
        length = headers.get(b"content-length", b"0")
        if length.isdigit() and int(length) > self._max_body:
            await _refuse(
                send, 413, f"The request body is larger than {self._max_body} bytes.", cors
            )
            return
        await self._app(scope, self._limited(receive), self._with_headers(send, cors))

    async def _preflight(self, send: Send, cors: list[tuple[bytes, bytes]]) -> None:
        headers = [
            *cors,
            (b"access-control-allow-methods", _METHODS),
            (b"access-control-allow-headers", _ALLOW_HEADERS),
            (b"access-control-max-age", b"600"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    def _limited(self, receive: Receive) -> Receive:
        seen = 0
        limit = self._max_body

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # a chunked body without a Content-Length
                    raise ApiError(413, f"The request body is larger than {limit} bytes.")
            return message

        return limited

    @staticmethod
    def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
        if not extra:
            return send

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return sending
