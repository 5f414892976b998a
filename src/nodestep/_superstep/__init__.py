"""The superstep core: pure functions over plain data, with no I/O and no event loop.

* ``position``: where a thread stands: its values, and the planned or unfinished superstep.
* ``plan``: turn the routes of one superstep's tasks into the next superstep's tasks.
* ``barriers``: joins and deferred nodes, whose routes wait before they plan a task.
* ``merge``: fold writes into the values, in a fixed order.
* ``private``: which changes to nodes' private state a completed superstep keeps or refuses.
* ``machine``: how a position moves on, one function per kind of event.
* ``records``: the history record kinds, typed, with their JSON form.
* ``attempts``: the records of a retried attempt and of a circuit breaker's change.
* ``nested``: the record that holds a subgraph run's record in the parent's thread.
* ``codec``: the JSON forms of the parts records are made of (routes, tasks, results).
* ``replay``: fold stored records into a position, through the same functions.

The run loop, the stores and the public API are built on these; a test checks that nothing
here imports a store, an event loop or the file system.
"""
