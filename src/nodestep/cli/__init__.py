"""The ``nodestep`` command line: threads, history, forks, exports and runs from a terminal.

``main`` is the console script (``pip install 'nodestep[cli]'`` brings click and rich); see
``docs/cli.md``. ``load_target`` turns a ``MODULE:GRAPH`` argument into its graph, for
tools of your own that take the same arguments.
"""

from nodestep._public import publish as _publish
from nodestep.cli._main import main
from nodestep.cli._target import load_target

__all__ = ["load_target", "main"]

_publish(__name__, __all__, globals())
