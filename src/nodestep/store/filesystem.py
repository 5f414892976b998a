"""Deprecated path: import ``FilesystemStateStore`` from ``nodestep`` or ``nodestep.store``.

0.1 documented this module; its public name still resolves here, with a
``DeprecationWarning``, until nodestep 0.3.
"""

from nodestep._public import forward

__getattr__ = forward(__name__, {"FilesystemStateStore": "nodestep.store"})
