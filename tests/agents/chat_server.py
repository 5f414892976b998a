"""A real HTTP server on 127.0.0.1 that speaks the chat-completions API, for client tests.

Each test gives it the answers to send, in order; it records every request it gets. An
answer is a status and a JSON body, or a list of chunks to send as server-sent events
(``stream: true``), which end with ``data: [DONE]`` unless the answer is ``cut``; or
``raw`` bytes of a ``content_type``, sent as they are.
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
    """One answer: a JSON body, or (``events``) a server-sent event stream, or raw bytes."""

    status: int = 200
    body: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering
    cut: bool = False  # the events end without data: [DONE], as a lost connection does
    raw: bytes | None = None
    content_type: str = "application/json"


def completion(
    content: str | None = None, tool_calls: list[dict[str, Any]] | None = None
) -> Answer:
    """A non-streamed chat completion with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in tool_calls
        ]
    return Answer(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "local-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    )


def chunk(delta: dict[str, Any]) -> dict[str, Any]:
    """One streamed chunk carrying ``delta``."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "local-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


class ChatServer:
    """The server's state: answers still to send, requests received."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""
        # Refuse a conversation with a tool call that no tool message answers, with a 400,
        # as OpenAI's API does.
        self.strict_tool_calls = False


def unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """Return the ids of tool calls that the tool messages right after them do not answer."""
    missing: list[str] = []
    pending: list[str] = []
    for message in [*messages, {"role": "end"}]:
        if message["role"] == "tool":
            pending = [i for i in pending if i != message.get("tool_call_id")]
            continue
        missing += pending
        pending = [call["id"] for call in message.get("tool_calls") or ()]
    return missing


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            with server.lock:
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                missing = unanswered_calls(body.get("messages", []))
                if server.strict_tool_calls and missing:
                    text = (
                        "An assistant message with 'tool_calls' must be followed by tool "
                        "messages responding to each 'tool_call_id'. The following "
                        f"tool_call_ids did not have response messages: {', '.join(missing)}"
                    )
                    answer = Answer(400, {"error": {"message": text, "type": "invalid_request"}})
                elif server.answers:
                    answer = server.answers.pop(0)
                else:
                    answer = Answer(500, {"error": {"message": "no answer left"}})
            time.sleep(answer.delay)  # real time: a slow server, for the client's timeout
            if answer.events is None:
                data = answer.raw if answer.raw is not None else json.dumps(answer.body or {})
                data = data if isinstance(data, bytes) else data.encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in answer.events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            if not answer.cut:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    """Run a chat-completions server on a free port of 127.0.0.1 for the ``with`` block."""
    state = ChatServer()
    with local_http_server(_handler(state), clients_may_give_up=True) as root:
        state.url = f"{root}/v1"
        yield state
