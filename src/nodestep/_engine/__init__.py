"""The engine: runs a graph's calls on the superstep core (``_superstep``), with a store.

Its modules sit side by side, one concept each, grouped here by what they are about.

One call:

* ``loop``: one call (``execute``) and its supersteps (``RunLoop``): plan, execute, update.
* ``request``: the checked options of one call (``RunRequest``).
* ``compiled``: a graph as the engine runs it, and the services its threads need.
* ``runtime``: everything one call needs while it runs: ids, options, routes, events.
* ``turns``: open a call's turn (start, continue or resume) as the thread's status allows.
* ``request_keys``: a call with a ``request_key``: a retry never applies its input twice.
* ``lease``: one writer per thread branch: take its lease, keep it alive, give it back.
* ``blocked_renewal``: keep a run's lease alive while a plain ``def`` node blocks its loop.
* ``writer``: append a thread's records to its store, numbered, with checkpoints.
* ``positions``: load a branch's position from its store; the cache of the latest ones.
* ``redact``: what a failed run stores of its error: no secrets, always storable.

One superstep:

* ``step_tasks``: the execute phase: run a superstep's tasks, inline or at once.
* ``tasks``: run one task: call its node, turn what it returns into writes, route failures.
* ``guarded``: a task under its node's retry policy and circuit breaker.
* ``routing``: resolve routes at run time: ``Command``/``Send`` targets, and edges.
* ``task_input``: a ``Send`` payload as the input model its node declares.
* ``private_state``: a node's private state in a task, and read back from a thread.
* ``node_cache``: answer a task of a node with ``@node(cache=...)`` from a stored result.
* ``interrupts``: ``interrupt()`` pauses a run for an answer; ``Resume`` answers it.
* ``inbox``: where a superstep's tasks report back, from the loop or from worker threads.
* ``thread_pool``: the worker threads of plain ``def`` nodes.
* ``backend``: the two things the engine does per event loop: task groups, a lone task.

Results and events:

* ``results``: what a run returns and what a stream yields.
* ``step_events``: the stream events a run sends, and where they go (``EventSink``).
* ``streaming``: a stream's run in a task of its own, handing events over one at a time.
* ``sync``: the sync API, a thin driver of the async one.

Subgraphs:

* ``subgraph``: a compiled graph run as one task of another, in the parent's thread.
* ``subgraph_map``: which state flows into a subgraph and back (``StateMap``).
* ``subgraph_writer``: a subgraph run's records, stored in the parent's thread.
* ``subgraph_state``: read where a subgraph run of a thread stands.
* ``handoff``: ``Command(graph=PARENT)``: a subgraph's node hands its command up.

A thread outside a run:

* ``history``: the public views of a thread's history: events, snapshots, steps.
* ``history_ops``: read and change a thread's history: time travel, edits and forks.
* ``walk``: every event of a branch with the state after it, in one fold.
* ``thread_writes``: the thread methods that write, holding the branch's lease.
* ``as_node``: ``update_state(as_node=...)``: an edit recorded as a node's write.
* ``migrate``: move a stored thread to another state class.
"""
