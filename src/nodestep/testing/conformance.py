"""Deprecated path: import the conformance suite and its helpers from ``nodestep.testing``.

0.1 documented this module; its names still resolve here, each with a
``DeprecationWarning``, until nodestep 0.3.
"""

from nodestep._public import forward

__getattr__ = forward(
    __name__,
    dict.fromkeys(
        ["StateStoreConformance", "checkpoint", "event", "events", "fork", "seqs"],
        "nodestep.testing",
    ),
)
