"""``python -m nodestep``: the ``nodestep`` command line, as the console script runs it.

Without click and rich it prints the one line the script prints, naming
``pip install 'nodestep[cli]'``, and exits 1; see ``docs/cli.md``.
"""

import sys

from nodestep.cli import main

if __name__ == "__main__":
    sys.exit(main())
