"""One real HTTP server on a free port of 127.0.0.1, for the fake model and API servers.

The fake servers of the agent tests (chat completions, Anthropic's Messages API, OpenAPI
operations, the users API) differ in what they answer, not in how they run: a
``ThreadingHTTPServer`` on a thread of its own for the ``with`` block, shut down after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def local_http_server(
    handler: type[BaseHTTPRequestHandler], *, clients_may_give_up: bool = False
) -> Iterator[str]:
    """Serve ``handler`` on a free port of 127.0.0.1 for the block; yield the root URL.

    Args:
        handler: The request handler class.
        clients_may_give_up: A client may time out and close its socket while a handler
            still sleeps: the server then neither waits for that handler when it closes
            nor reports its broken pipe.
    """
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True  # a handler still sleeping for a client that gave up
    if clients_may_give_up:
        httpd.block_on_close = False
        # A client that timed out closed its socket; the handler's broken pipe is expected.
        httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
