"""The refund agent of examples/yaml_agent.py: its state, services and node functions."""
