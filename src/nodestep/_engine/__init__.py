"""The engine: the run loop, tasks, interrupts, history records and streaming."""
