"""The superstep core: pure functions over plain data, with no I/O and no event loop.

* ``position``: where a thread stands between events (values, the planned superstep, the
  finished and paused tasks of an unfinished one).
* ``plan``: turn the routes of one superstep's tasks into the next superstep's tasks.
* ``merge``: fold writes into the values, in a fixed order.
* ``machine``: how a position moves on, one function per kind of event.
* ``records``: the history record kinds, typed, with their JSON form (parts in ``codec``).
* ``replay``: fold stored records into a position, through the same functions.

The run loop, the stores and the public API are built on these; a test checks that nothing
here imports a store, an event loop or the file system.
"""
