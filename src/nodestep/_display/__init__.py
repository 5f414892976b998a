"""Drawings and HTML views of nodestep's objects, for notebooks and any other HTML page.

Nothing here imports the rest of nodestep: each renderer takes plain data (a ``Diagram``,
rows of text) and returns text, so the engine pays nothing for it at import time and a
web page (the sandbox, a report) can reuse the pieces without a notebook.
"""
