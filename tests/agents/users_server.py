"""A user management API on 127.0.0.1 with its OpenAPI document, for the Liman sample's test.

It answers what the ``simple_openapi`` sample's FastAPI server answers (the same routes,
operation ids, status codes and bodies, over a fresh copy of the same five users), and
serves its OpenAPI document at ``/openapi.json``, as FastAPI does. Written on the
standard library's ``http.server`` so the test needs no web framework; every request is
recorded with its method, path and JSON body.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from local_http import local_http_server

USERS: dict[str, dict[str, Any]] = {
    "12345": {"id": "12345", "name": "John", "email": "john@example.com", "region": "US",
              "is_admin": True},
    "67890": {"id": "67890", "name": "Max", "email": "max@example.com", "region": "EU",
              "is_admin": True},
    "54321": {"id": "54321", "name": "Alice", "email": "alice@example.com", "region": "US",
              "is_admin": False},
    "17821": {"id": "17821", "name": "Sofia", "email": "sofia@example.com", "region": "EU",
              "is_admin": False},
    "99821": {"id": "99821", "name": "Bob", "email": "bob@example.com", "region": "EU",
              "is_admin": False},
}  # fmt: skip


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _operation(op_id: str, summary: str, *params: str, **extra: Any) -> dict[str, Any]:
    return {
        "operationId": op_id,
        "summary": summary,
        "parameters": [_path_param(p) for p in params],
        "responses": {"200": {"description": "Successful Response"}},
        **extra,
    }


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "User Management API", "version": "1.0.0"},
    "paths": {
        "/users/{user_id}": {
            "get": _operation("get_user", "Get a user by their ID", "user_id"),
            "put": _operation(
                "update_user",
                "Update a user by ID",
                "user_id",
                requestBody={
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/UpdateUserRequest"}
                        }
                    },
                },
            ),
            "delete": _operation("delete_user", "Delete a user by ID", "user_id"),
        },
        "/users": {"get": _operation("list_users", "List all users in the system")},
        "/users/search/name/{name}": {
            "get": _operation("search_user", "Search a user by name", "name")
        },
        "/users/search/region/{region}": {
            "get": _operation("search_by_region", "Find user IDs by region", "region")
        },
    },
    "components": {
        "schemas": {
            "UpdateUserRequest": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "email": {"type": "string"},
                    "is_admin": {"type": "boolean"},
                },
            }
        }
    },
}

Answer = tuple[int, Any]


class UsersApi:
    """The API's data and the requests it received; ``url`` is set once it listens."""

    def __init__(self) -> None:
        self.users = copy.deepcopy(USERS)
        self.requests: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""

    def get_user(self, user_id: str) -> Answer:
        user = self.users.get(user_id)
        return (200, user) if user else (404, {"detail": f"User with ID {user_id} not found"})

    def list_users(self) -> Answer:
        return 200, list(self.users.values())

    def search_user(self, name: str) -> Answer:
        for user in self.users.values():
            if user["name"].lower() == name.lower():
                return 200, user
        return 404, {"detail": f"No user found with name {name}"}

    def search_by_region(self, region: str) -> Answer:
        ids = [u["id"] for u in self.users.values() if u["region"].lower() == region.lower()]
        return (200, ids) if ids else (404, {"detail": f"No users found in region {region}"})

    def update_user(self, user_id: str, body: Any) -> Answer:
        if user_id not in self.users:
            return 404, {"detail": f"User with ID {user_id} not found"}
        user, changed = self.users[user_id], False
        for field in ("name", "email", "is_admin"):
            value = (body or {}).get(field)
            if value is not None and value != user.get(field):
                user[field], changed = value, True
        return 200, {"was_changed": changed, "user": user}

    def delete_user(self, user_id: str) -> Answer:
        if self.users.pop(user_id, None) is None:
            return 404, {"detail": f"User with ID {user_id} not found"}
        return 200, {"message": f"User with ID {user_id} has been deleted"}

    def answer(self, method: str, path: str, body: Any) -> Answer:
        """Route one request, as FastAPI would, and record it."""
        with self.lock:
            self.requests.append((method, path, body))
            for pattern, routes in self._routes():
                match = re.fullmatch(pattern, path)
                if match is None:
                    continue
                route = routes.get(method)
                if route is None:
                    return 405, {"detail": "Method Not Allowed"}
                return route(*match.groups(), body) if method == "PUT" else route(*match.groups())
            return 404, {"detail": "Not Found"}

    def _routes(self) -> list[tuple[str, dict[str, Callable[..., Answer]]]]:
        return [
            ("/openapi.json", {"GET": lambda: (200, OPENAPI)}),
            ("/users", {"GET": self.list_users}),
            ("/users/search/name/([^/]+)", {"GET": self.search_user}),
            ("/users/search/region/([^/]+)", {"GET": self.search_by_region}),
            (
                "/users/([^/]+)",
                {"GET": self.get_user, "PUT": self.update_user, "DELETE": self.delete_user},
            ),
        ]


def _handler(api: UsersApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            status, body = api.answer(self.command, path, json.loads(raw) if raw else None)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_DELETE = do_POST = _serve

    return Handler


@contextmanager
def users_api() -> Iterator[UsersApi]:
    """Serve a fresh copy of the API on a free port of 127.0.0.1 for the ``with`` block."""
    api = UsersApi()
    with local_http_server(_handler(api)) as root:
        api.url = root
        yield api
