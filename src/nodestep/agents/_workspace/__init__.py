"""A per-thread file workspace for agents: paths, the state field, the ``Workspace`` tools
use, a folder back end, the model's tools, and the tool node's part."""
