"""Deprecated path: import the errors from ``nodestep`` (``from nodestep import StateStoreError``).

0.1 documented this module; its names still resolve here, each with a
``DeprecationWarning``, until nodestep 0.3. The errors live in ``nodestep._errors``.
"""

from nodestep._public import forward

__getattr__ = forward(
    __name__,
    dict.fromkeys(
        [
            "CircuitOpenError",
            "ConditionError",
            "ContextNotProvidedError",
            "CredentialsError",
            "GraphConfigError",
            "GraphExecutionError",
            "GraphTimeoutError",
            "InternalError",
            "InvalidUpdateError",
            "ModelError",
            "NodeTimeoutError",
            "NodestepError",
            "OpenAPICallError",
            "ResumeError",
            "RunLimitExceededError",
            "StateStoreError",
            "StateUpdateError",
            "ThreadBusyError",
            "ThreadConflictError",
            "UnknownThreadError",
        ],
        "nodestep",
    ),
)
