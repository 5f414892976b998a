"""Deprecated path: import ``PostgresStateStore`` from ``nodestep`` or ``nodestep.store``.

0.1 documented this module, and ``python -m nodestep.store.postgres DSN`` to create the
tables; both still work, with a ``DeprecationWarning``, until nodestep 0.3. The command is
now ``python -m nodestep.store postgres-schema DSN``.
"""

import sys

from nodestep._public import REMOVED_IN, forward

__getattr__ = forward(__name__, {"PostgresStateStore": "nodestep.store"})

if __name__ == "__main__":
    from nodestep.store.__main__ import main

    # One line on stderr: a command's users read it there, not in a warning's traceback.
    print(
        f"DeprecationWarning: python -m nodestep.store.postgres is now 'python -m "
        f"nodestep.store postgres-schema' (same arguments); the old command works until "
        f"nodestep {REMOVED_IN}.",
        file=sys.stderr,
    )
    sys.exit(main(["postgres-schema", *sys.argv[1:]]))
