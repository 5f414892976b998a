"""The condition language of ``when``: parse, check against a state, evaluate.

Pure: it reads values and returns true or false, and imports nothing of nodestep but its
errors, so flows, the engine and manifests all build on it.
"""
