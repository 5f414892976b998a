"""A real HTTP server on 127.0.0.1 that speaks Anthropic's Messages API, for client tests.

Each test gives it the answers to send, in order; it records every request it gets (path,
body, headers). An answer is a status and a JSON body, or a list of events to send as
server-sent events (``event: <type>`` and ``data: <json>``), as the API streams a reply.
``reply`` builds a Message body, and ``events_of`` the events that stream the same
message: a text block in word-sized deltas, a tool call's input in two JSON pieces.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from local_http import local_http_server


@dataclass
class Answer:
    """One answer: a JSON body, or (``events``) a server-sent event stream."""

    status: int = 200
    body: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (or before event ``pause_at``)
    pause_at: int | None = None  # a stream that stalls after its first events
    raw: bytes | None = None  # a body sent as it is, of ``content_type``
    content_type: str = "application/json"


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool_use content block."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def reply(
    *blocks: dict[str, Any],
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int | None = None,
) -> dict[str, Any]:
    """A Message body, as the API answers a request without ``stream``."""
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def error(status: int, kind: str, message: str) -> Answer:
    """An error answer with the API's error body."""
    return Answer(status, {"type": "error", "error": {"type": kind, "message": message}})


def events_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events that stream ``message`` (a ``reply`` body), a ping among them."""
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    out: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        out += _block_events(index, block)
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }
    )
    out.append({"type": "message_stop"})
    return out


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "text":
        first = {"type": "text", "text": ""}
        words = block["text"].split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
    else:
        first = {**block, "input": {}}
        args = json.dumps(block["input"])
        half = len(args) // 2
        deltas = [
            {"type": "input_json_delta", "partial_json": part}
            for part in (args[:half], args[half:])
        ]
    return [
        {"type": "content_block_start", "index": index, "content_block": first},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


class MessagesServer:
    """The server's state: answers still to send, requests received."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""


def _handler(server: MessagesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            with server.lock:
                server.requests.append(
                    {"path": self.path, "body": body, "headers": dict(self.headers.items())}
                )
                answer = (
                    server.answers.pop(0)
                    if server.answers
                    else error(500, "api_error", "no answer left")
                )
            if answer.pause_at is None:
                time.sleep(answer.delay)  # real time: a slow server, for the client's timeout
            if answer.events is None:
                self._json(answer)
            else:
                self._events(answer)

        def _json(self, answer: Answer) -> None:
            data = answer.raw if answer.raw is not None else json.dumps(answer.body or {}).encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in answer.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _events(self, answer: Answer) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for index, event in enumerate(answer.events or ()):
                if index == answer.pause_at:
                    time.sleep(answer.delay)
                self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def messages_server() -> Iterator[MessagesServer]:
    """Run a Messages API server on a free port of 127.0.0.1 for the ``with`` block."""
    state = MessagesServer()
    with local_http_server(_handler(state), clients_may_give_up=True) as root:
        state.url = root
        yield state
