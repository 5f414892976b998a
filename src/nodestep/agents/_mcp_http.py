"""The HTTP statuses an MCP server over streamable HTTP answered, for ``MCPClient``'s errors.

The ``mcp`` SDK turns an HTTP error status into a JSON-RPC error without it ("Server
returned an error response"), so a 401 and a 500 would read alike. ``MCPClient`` gives the
SDK an HTTP client whose event hooks note, for each kind of request (the handshake, the
listing, the call of each tool), the status of the last one sent: ``HttpAnswers``. When a
request fails, the client's error names the status its kind last got, and what to do.

Why by kind rather than by request: the SDK's error carries no request id. Each request
clears its kind's status as it is sent, so a status never outlives the next request of
its kind; two calls of one tool at once may see each other's, from the same server.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["HttpAnswers", "http_advice"]

_Kind = tuple[str, str]  # (JSON-RPC method, the tool's name for tools/call, else "")


class HttpAnswers:
    """The status of the last HTTP request of each kind an MCP client sent its server."""

    def __init__(self) -> None:
        self._last: dict[_Kind, int | None] = {}

    def hooks(self) -> dict[str, list[Any]]:
        """Return the ``event_hooks`` of the HTTP client that notes them."""
        return {"request": [self._sent], "response": [self._answered]}

    def status(self, method: str, tool: str = "") -> int | None:
        """Return the HTTP error status (400 and up) the last request of this kind got;
        ``None`` when it got none, no answer yet, or a success."""
        found = self._last.get((method, tool))
        return found if found is not None and found >= 400 else None

    async def _sent(self, request: Any) -> None:
        kind = _kind(request)
        if kind is not None:
            self._last[kind] = None

    async def _answered(self, response: Any) -> None:
        kind = _kind(response.request)
        if kind is not None:
            self._last[kind] = response.status_code


def _kind(request: Any) -> _Kind | None:
    """Return the kind of a JSON-RPC request the SDK POSTs; ``None`` for anything else (a
    notification, the event stream's GET, the closing DELETE)."""
    if request.method != "POST":
        return None
    try:
        message = orjson.loads(request.content)
    except Exception:  # a hook must never break a request: a body it cannot read is no kind
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    method = message.get("method")
    params = message.get("params")
    tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else ""
    if not isinstance(method, str) or not isinstance(tool, str):
        return None
    return method, tool


def http_advice(status: int, connecting: bool) -> tuple[str, str]:
    """Return ``status`` as shown (``HTTP 401 Unauthorized``) and a sentence on what to do
    about it; ``connecting``: the request was the handshake."""
    from http import HTTPStatus  # here: only an error needs it, and importing nodestep need not

    try:
        shown = f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:  # a status the standard does not name
        shown = f"HTTP {status}"
    if status == 401:
        fix = "Send the credentials it asks for: MCPClient(headers={'Authorization': ...})."
    elif status == 403:
        fix = "It refused these credentials: check the headers given to MCPClient(headers=...)."
    elif status == 404 and connecting:
        fix = "Check the URL: it must be the server's MCP endpoint, often ending in /mcp."
    elif status == 404:
        fix = "It no longer knows this session (it may have restarted): open the client again."
    elif status >= 500:
        fix = "The server failed: look at its log, then try again."
    else:
        fix = "It refused the request: check the URL and the headers."
    return shown, fix
