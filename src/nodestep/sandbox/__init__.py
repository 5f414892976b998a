"""The sandbox: a web app at ``/ui`` to run, watch and read threads, on the server's API.

``create_app`` returns the ASGI app of ``nodestep.serve`` with the sandbox's pages at
``/ui``; ``serve`` runs it under uvicorn (``nodestep sandbox MODULE:GRAPH`` from a
terminal). Pages are rendered on the server, with one small script for live runs; every
asset ships in the package, so it works offline. See ``docs/sandbox.md``. Needs the
``sandbox`` extra: ``pip install 'nodestep[sandbox]'``.
"""

try:
    import httpx  # noqa: F401 - checked here so that a missing extra says what to install
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as missing:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        f"nodestep.sandbox needs the sandbox extra ({missing.name} is missing): "
        f"pip install 'nodestep[sandbox]'"
    ) from missing

from nodestep._public import publish as _publish
from nodestep.sandbox._app import create_app
from nodestep.sandbox._server import serve

__all__ = ["create_app", "serve"]

_publish(__name__, __all__, globals())
