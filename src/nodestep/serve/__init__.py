"""Serve graphs over the LangGraph Agent Server API: assistants, threads, runs, streams.

``create_app`` returns an ASGI app for embedding and tests; ``serve`` runs it under
uvicorn. The LangGraph SDKs (Python and JS) and the chat UIs built on them talk to it
unchanged; threads keep their history in any nodestep store. See ``docs/serving.md``.
Needs the ``serve`` extra: ``pip install 'nodestep[serve]'``.
"""

try:
    import starlette  # noqa: F401 - checked here so that a missing extra says what to install
    import uvicorn  # noqa: F401
except ImportError as missing:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        f"nodestep.serve needs the serve extra ({missing.name} is missing): "
        f"pip install 'nodestep[serve]'"
    ) from missing

from nodestep._public import publish as _publish
from nodestep.serve._app import create_app, default_memory
from nodestep.serve._security import bind_access
from nodestep.serve._server import serve

__all__ = ["bind_access", "create_app", "default_memory", "serve"]

_publish(__name__, __all__, globals())
