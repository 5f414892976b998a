"""Start ``serve`` on the test graphs: ``python serve_launcher.py PORT STORE [TOKEN]``.

With ``NODESTEP_TEST_WORKERS`` set to a PostgreSQL URL, the runs go to workers there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from serve_graphs import GRAPHS

from nodestep.serve import serve

if __name__ == "__main__":
    port, store = int(sys.argv[1]), sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else None
    workers = os.environ.get("NODESTEP_TEST_WORKERS") or None
    paths = {name: f"serve_graphs:{name}" for name in GRAPHS}
    serve(GRAPHS, store=store, port=port, token=token, workers=workers, graph_paths=paths)
