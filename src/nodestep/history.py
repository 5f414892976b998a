"""Provenance and diffs of stored threads, read from a store alone.

``provenance`` tells which event, node, run and time wrote a state field's value (for a
field with a reducer, every write merged into it); ``diff`` compares two branches or two
events of a thread: their fork point, the fields that differ, and the events on each side.
Both read the stored records only, so they need no graph: the command line calls them with
nothing but a store. See ``docs/provenance.md``.

Which fields have a reducer is read from the records unless the state class is given
(``state=``, as ``graph.provenance`` and ``graph.diff`` do): a field written with
``Replace``, twice in one superstep, or whose stored checkpoint is not its last write.
"""

from nodestep._engine.diff import FieldChange, ThreadDiff, diff
from nodestep._engine.field_writes import Write
from nodestep._engine.provenance import Provenance, provenance
from nodestep._public import publish as _publish

__all__ = ["FieldChange", "Provenance", "ThreadDiff", "Write", "diff", "provenance"]

_publish(__name__, __all__, globals())
