"""The superstep algebra: pure functions over plain data, with no I/O and no event loop.

* ``position``: where a thread stands between events (values, the planned superstep, the
  finished and paused tasks of an unfinished one).
* ``plan``: turn the routes of one superstep's tasks into the next superstep's tasks.
* ``merge``: fold one superstep's writes into the values, in a fixed order.

The run loop, the stores and the public API are built on these; a test checks that nothing
here imports a store, an event loop or the file system.
"""
