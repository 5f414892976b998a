"""The built-in middleware for agents, on the public face of ``nodestep.agents``."""
