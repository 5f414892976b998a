"""The condition language of ``when``: parse, check against a state, evaluate.

Pure: it reads values and returns true or false, and imports nothing of nodestep but its
errors, so flows, the engine and manifests all build on it.
"""

from nodestep.conditions.condition import CompiledCondition, Condition, Source, failed
from nodestep.conditions.env import NO_CONTEXT, Env

__all__ = ["NO_CONTEXT", "CompiledCondition", "Condition", "Env", "Source", "failed"]
