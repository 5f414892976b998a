"""Write ``history_v2.jsonl``: ``history_v1.jsonl`` continued by a release writing format 2.

Run it with a nodestep release that writes history format version 2 (it refuses to run with
another one)::

    /path/to/that/venv/bin/python tests/data/make_history_v2.py

It copies the version 1 fixture and goes on with its unfinished threads as
``history_v1_expected.json`` says (``"resume"``), checking that each reaches the state
recorded there (``"continued"``). The result has a version 2 header, the format 1 lines of
the old release, and format 2 lines after them, none with a checksum.
``tests/store/test_format_versions.py`` checks that the current nodestep reads it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import v1_graphs  # noqa: E402

from nodestep import FilesystemStateStore, Resume  # noqa: E402
from nodestep.store import _codec  # noqa: E402

EXPECTED = json.loads((HERE / "history_v1_expected.json").read_text())
OUT = HERE / "history_v2.jsonl"


async def main() -> None:
    shutil.copyfile(HERE / "history_v1.jsonl", OUT)
    store = FilesystemStateStore(OUT)
    graphs = {name: v1_graphs.build(name, store) for name in v1_graphs.GRAPHS}
    for thread, how in EXPECTED["resume"].items():
        graph = graphs[v1_graphs.THREADS[thread]]
        if "resume" in how:
            result = await graph.ainvoke(None, thread_id=thread, resume=Resume(how["resume"]))
        elif "answers" in how:
            answers = Resume(answers=how["answers"])
            result = await graph.ainvoke(None, thread_id=thread, resume=answers)
        else:
            result = await graph.ainvoke(None, thread_id=thread)
        assert result.state.model_dump() == EXPECTED["continued"][thread]["load"], thread
    await store.aclose()


if __name__ == "__main__":
    if _codec.VERSION != 2:
        sys.exit(f"this nodestep writes format {_codec.VERSION}; run this with one writing 2")
    asyncio.run(main())
