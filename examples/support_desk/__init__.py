"""The support desk of examples/declarative_support.py: its state and node functions."""
