"""Deprecated path: import ``Condition`` and ``failed`` from ``nodestep``.

0.1 documented this module; its public names still resolve here, each with a
``DeprecationWarning``, until nodestep 0.3.
"""

from nodestep._public import forward

__getattr__ = forward(__name__, {"Condition": "nodestep", "failed": "nodestep"})
