"""The public ``Graph``: build it, run it, and read and change its threads."""
