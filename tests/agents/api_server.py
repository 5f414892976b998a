"""A real HTTP server on 127.0.0.1 for OpenAPI tool tests: scripted answers, recorded requests.

``answers`` maps ``"METHOD /path"`` (the path without its query) to a list of
``(status, JSON body)`` pairs, sent in order; the last one repeats. A route not there
answers 404. Every request is recorded with its method, path, query, headers and body.
``streams`` maps a route to ``(chunk, count)``: the answer is ``chunk`` sent ``count``
times without a length, until the client hangs up; ``sent`` counts the bytes it got out.
A body that is a ``Raw`` is sent as its bytes, with its content type and headers (an
answer written as another encoder writes JSON, a redirect).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from local_http import local_http_server


@dataclass
class Raw:
    """A body sent as it is."""

    data: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class ApiServer:
    """The server's state: answers by route, requests received."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, Any]]] = {}
        self.streams: dict[str, tuple[bytes, int]] = {}
        self.sent = 0
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""


def _handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            pass

        def _answer(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length) if length else b""
            route = f"{self.command} {parts.path}"
            with server.lock:
                server.requests.append(
                    {
                        "route": route,
                        "query": {k: v[0] for k, v in parse_qs(parts.query).items()},
                        "raw_query": parts.query,
                        "headers": dict(self.headers.items()),
                        "body": json.loads(raw) if raw else None,
                    }
                )
                stream = server.streams.get(route)
                queue = server.answers.get(route)
            if stream is not None:
                self._stream(*stream)
                return
            with server.lock:
                status, body = (
                    (queue.pop(0) if len(queue) > 1 else queue[0])
                    if queue
                    else (
                        404,
                        {"detail": f"no route {route}"},
                    )
                )
            sent = body if isinstance(body, Raw) else Raw(json.dumps(body).encode())
            self.send_response(status)
            self.send_header("Content-Type", sent.content_type)
            self.send_header("Content-Length", str(len(sent.data)))
            for key, value in sent.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(sent.data)

        def _stream(self, chunk: bytes, count: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()  # no length: the body ends when the connection closes
            try:
                for _ in range(count):
                    self.wfile.write(chunk)
                    with server.lock:
                        server.sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client read what it wanted and hung up
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

    return Handler


@contextmanager
def api_server() -> Iterator[ApiServer]:
    """Run the server on a free port of 127.0.0.1 for the ``with`` block."""
    state = ApiServer()
    with local_http_server(_handler(state)) as root:
        state.url = f"{root}/api"
        yield state
