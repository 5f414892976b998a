"""The agents' middleware: the model and tool hooks' contexts, their calls, and built-ins."""
