"""Sending one OpenAPI tool's request so that its credentials go nowhere but ``base_url``.

Five rules, each against a way a secret could leave with a request or its log:

1. The URL stays on ``base_url``: a document's path must be a plain absolute path
   (``/pets/{petId}``, checked at load), a path argument may not be ``.``, ``..`` or empty
   (httpx would remove the dot segment and the request would leave the operation's path),
   and the URL that is finally sent must have ``base_url``'s origin and path prefix.
   A redirect is never followed, whatever the client's ``follow_redirects``: httpx sends
   the headers again on each hop, so only not taking it keeps them on ``base_url``.
2. httpx's INFO log line names the URL, query included; while a tool sends, a filter on
   the ``httpx`` logger replaces every form of the call's secrets by ``[redacted]``.
3. An answer is read streaming, at most ``cap`` bytes: a server cannot make the tool
   message (and so the history) as large as it likes.
4. An answer that echoes a secret has it replaced by ``[redacted]`` in every form it can
   carry it in: as it is, URL-quoted, in base64, in any letter case, and inside a JSON
   string with any escapes (``\\/`` for ``/``, ``\\u00e9``), so decoding the answer cannot
   bring it back.
5. Errors name the tool, the method and the path, never a secret.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from nodestep._engine.redact import MASK, mask
from nodestep._errors import GraphConfigError, OpenAPICallError

__all__ = [
    "Answer",
    "Target",
    "call_error",
    "check_path",
    "fill_path",
    "is_json_media",
    "redacted",
    "send",
    "target_of",
]

_LOGGER = "httpx"
_MASK = "[redacted]"
_SENDING: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "nodestep_openapi_secrets", default=()
)


def call_error(message: str, status: int | None = None) -> OpenAPICallError:
    """Return an ``OpenAPICallError`` with its ``status`` (``None``: no answer)."""
    error = OpenAPICallError(message)
    error.status = status
    return error


@dataclass(frozen=True, slots=True)
class Target:
    """Where a tool's requests may go: ``base_url`` as httpx reads it.

    Attributes:
        url: ``base_url`` without its trailing ``/``; a path is appended to it.
        origin: The scheme, host and port every request must keep.
        prefix: The path every request's path must start with.
    """

    url: str
    origin: tuple[str, str, int | None]
    prefix: str


def target_of(httpx: Any, base_url: Any) -> Target:
    """Return the ``Target`` of ``base_url``.

    Raises:
        GraphConfigError: ``base_url`` is not an ``http(s)://host[/path]`` URL.
    """
    url = None
    if isinstance(base_url, str):
        try:
            url = httpx.URL(base_url)
        except (httpx.InvalidURL, TypeError, ValueError):
            url = None
    if url is None or url.scheme not in ("http", "https") or not url.host or url.query:
        raise GraphConfigError(
            f"openapi_tools got base_url={base_url!r}; pass where the API is served, as "
            f"http(s)://host[:port][/path] without a query, e.g. 'https://api.example.com/v1'."
        )
    prefix = url.raw_path.decode("ascii").rstrip("/")
    return Target(base_url.rstrip("/"), (url.scheme, url.host, url.port), prefix)


def check_path(path: Any, where: str) -> str:
    """Return a document's path if it is a plain absolute path, e.g. ``/pets/{petId}``.

    Raises:
        GraphConfigError: the path does not start with ``/``, or has a ``.`` or ``..``
            segment, a ``?``, a ``#`` or a backslash; appended to ``base_url`` it could
            name another host (``@evil:80/x``) or another path.
    """
    text = path if isinstance(path, str) else ""
    segments = text.split("/")[1:]
    if (
        not text.startswith("/")
        or any(s in (".", "..") for s in segments)
        or any(c in text for c in "?#\\")
        or not text.isprintable()
    ):
        raise GraphConfigError(
            f"OpenAPI {where} has the path {path!r}; a path starts with '/' and has no '.' "
            f"or '..' segment, '?', '#' or backslash, so the request stays on base_url. "
            f"Fix the document, or leave the operation out with operations=[...]."
        )
    return text


def fill_path(template: str, values: dict[str, Any], tool: str) -> str:
    """Return ``template`` with each ``{name}`` replaced by its value, percent-encoded.

    Raises:
        OpenAPICallError: a value would make a segment ``.``, ``..`` or empty, which would
            take the request off the operation's path (httpx removes dot segments).
    """
    segments = template.split("/")
    for i, segment in enumerate(segments):
        if "{" not in segment:
            continue
        for name, value in values.items():
            segment = segment.replace(f"{{{name}}}", quote(str(value), safe=""))
        if segment in ("", ".", ".."):
            shown = ", ".join(f"{k}={str(v)!r}" for k, v in values.items())
            raise call_error(
                f"{tool}: the arguments {shown} would leave the operation's path {template} "
                f"(a segment would be {segment!r}); call it again with other values."
            )
        segments[i] = segment
    return "/".join(segments)


@dataclass(frozen=True, slots=True)
class Answer:
    """What a server answered, read up to the cap.

    Attributes:
        status: The HTTP status.
        reason: Its reason phrase.
        json: Whether the content type says JSON.
        text: The body, decoded, secrets redacted.
        cut: ``None``, or how many bytes the whole body had (``-1``: unknown) when it was
            cut at the cap.
        location: A redirect's ``Location`` header, secrets redacted; ``""`` if none.
    """

    status: int
    reason: str
    json: bool
    text: str
    cut: int | None
    location: str = ""


async def send(
    httpx: Any,
    client: Any,
    target: Target,
    request: tuple[str, str, str],
    sent: dict[str, Any],
    *,
    timeout: float,
    cap: int,
    secrets: list[str],
) -> Answer:
    """Send a request and read its answer, up to ``cap`` bytes.

    Args:
        httpx: The httpx module.
        client: The caller's ``httpx.AsyncClient``, or ``None`` for one of this call's own.
        target: Where requests may go.
        request: ``(what, method, path)``: the tool as errors name it (``getPet (GET
            /pets/{petId})``), the method, and the filled path.
        sent: httpx's keywords: ``params``, ``headers``, ``json``.
        timeout: Seconds, for a client of this call's own.
        cap: How many bytes of the answer are read at most.
        secrets: Every string that holds the call's secret.

    Raises:
        OpenAPICallError: the URL would leave ``target``, or no answer came.
    """
    what, method, path = request
    url = _checked_url(httpx, target, path, what)
    _install_filter()
    # Every form: a server that echoes the query string echoes the key percent-encoded.
    forms = _forms(httpx, secrets)
    token = _SENDING.set(forms)
    try:
        if client is not None:
            return await _read(client, method, url, sent, cap, forms)
        async with httpx.AsyncClient(timeout=timeout) as own:
            return await _read(own, method, url, sent, cap, forms)
    except httpx.HTTPError as error:
        raise call_error(
            f"{what} could not reach {target.url}: {type(error).__name__}. Check that the "
            f"server is up and the base URL."
        ) from None
    finally:
        _SENDING.reset(token)


def _checked_url(httpx: Any, target: Target, path: str, what: str) -> Any:
    try:
        url = httpx.URL(target.url + path)
    except (httpx.InvalidURL, ValueError):
        url = None
    raw = url.raw_path.decode("ascii", "replace") if url is not None else ""
    if url is None or (url.scheme, url.host, url.port) != target.origin:
        raise call_error(
            f"{what}: the request would go to another place, not to the base URL's origin "
            f"{target.url}; it was not sent, and no credentials left. Fix the document."
        )
    if not (raw == target.prefix or raw.startswith(target.prefix + "/")):
        raise call_error(
            f"{what}: the request would leave the base URL's path {target.prefix or '/'}; "
            f"it was not sent. Fix the document."
        )
    return url


async def _read(
    client: Any, method: str, url: Any, sent: dict[str, Any], cap: int, forms: tuple[str, ...]
) -> Answer:
    # follow_redirects=False per request: a client of the caller's own may follow them,
    # and httpx would send the credentials to wherever the Location points.
    async with client.stream(method, url, follow_redirects=False, **sent) as answer:
        chunks: list[bytes] = []
        size = 0
        cut: int | None = None
        # aclosing: a loop left early must close the byte stream's generator itself.
        async with aclosing(answer.aiter_bytes()) as stream:
            async for chunk in stream:
                if size + len(chunk) > cap:
                    chunks.append(chunk[: cap - size])
                    length = answer.headers.get("content-length", "")
                    cut = int(length) if length.isdigit() else -1
                    break  # leaving the block closes the connection: the rest is never read
                chunks.append(chunk)
                size += len(chunk)
        text = _decode(b"".join(chunks), answer.charset_encoding)
        content_type = answer.headers.get("content-type", "")
        status, reason = answer.status_code, answer.reason_phrase
        location = redacted(answer.headers.get("location", ""), forms)
    json_ = is_json_media(content_type)
    return Answer(status, reason, json_, redacted(text, forms), cut, location)


def is_json_media(media_type: str) -> bool:
    """Tell whether a media type is JSON: ``application/json``, with parameters
    (``;charset=UTF-8``) or not, or any type with the ``+json`` suffix
    (``application/vnd.api+json``, ``application/problem+json``)."""
    essence = media_type.split(";", 1)[0].strip().lower()
    return essence == "application/json" or (
        essence.startswith("application/") and essence.endswith("+json")
    )


def _decode(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


# A JSON string, or the start of one a cut answer leaves open.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)', re.DOTALL)


def redacted(text: str, secrets: Sequence[str]) -> str:
    """Return ``text`` with every form of each of ``secrets`` replaced by ``[redacted]``.

    Why: a server that echoes the request (a debug endpoint) must not put the secret into
    the tool message, and so into the history. The forms are the engine's (``mask``:
    URL-quoted, base64, any letter case...); a JSON string written with escapes is
    decoded first, and written again, redacted, if it holds a secret: a server may
    escape any character (PHP writes ``/`` as ``\\/``), and the answer is decoded later.
    """
    given = [secret for secret in secrets if secret]
    if not given:
        return text
    if "\\" in text:
        text = _JSON_STRING.sub(lambda found: _string_redacted(found.group(0), given), text)
    # mask() writes the engine's MASK; a tool message says [redacted], as documented.
    return mask(text, given).replace(MASK, _MASK)


def _string_redacted(literal: str, secrets: list[str]) -> str:
    """Return a JSON string literal, written again with its secrets masked if it has any."""
    closed = len(literal) > 1 and literal.endswith('"')
    inner = literal[1:-1] if closed else literal[1:]
    if "\\" not in inner:
        return literal  # no escapes: the plain forms are masked in the whole text
    try:
        decoded = json.loads(f'"{inner}"', strict=False)
    except ValueError:  # cut inside an escape, or not JSON at all
        return literal
    masked = mask(decoded, secrets)
    if masked == decoded:
        return literal
    out = json.dumps(masked, ensure_ascii=False)
    return out if closed else out[:-1]


def _forms(httpx: Any, secrets: list[str]) -> tuple[str, ...]:
    """Return every form in which ``secrets`` can appear in a logged URL."""
    forms = set()
    for secret in secrets:
        if secret:
            forms |= {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
            # The form httpx itself writes into the query string.
            query = httpx.URL("http://x/", params={"k": secret}).query.decode("ascii")
            forms.add(query.removeprefix("k="))
    return tuple(sorted(forms, key=len, reverse=True))


class _RedactSecrets(logging.Filter):
    """Replace the secrets of the request being sent in httpx's log records."""

    def filter(self, record: logging.LogRecord) -> bool:
        forms = _SENDING.get()
        if forms:
            message = record.getMessage()
            for form in forms:
                message = message.replace(form, _MASK)
            record.msg, record.args = message, ()
        return True


_FILTER = _RedactSecrets()


def _install_filter() -> None:
    # Once, and on the logger itself: a logger's filters see every record it makes
    # before any handler does, the root's included.
    logger = logging.getLogger(_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
