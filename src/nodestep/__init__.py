"""nodestep: a superstep graph engine for agents and durable workflows.

Nodes are plain functions that read a typed state and return an update. The engine runs them
in supersteps, records every step as an event, and lets you pause, resume, fork and travel
back in time.
"""

import logging

from nodestep.engine.interrupts import GraphInterrupt, Interrupt, Resume, interrupt
from nodestep.engine.results import (
    FinalEventData,
    GraphResult,
    InterruptEventData,
    StreamEvent,
)
from nodestep.errors import (
    ContextNotProvidedError,
    GraphConfigError,
    GraphExecutionError,
    GraphTimeoutError,
    InternalError,
    InvalidUpdateError,
    NodestepError,
    NodeTimeoutError,
    ResumeError,
    RunLimitExceededError,
    StateStoreError,
    StateUpdateError,
    ThreadBusyError,
    ThreadConflictError,
    UnknownThreadError,
)
from nodestep.flow.edges import END, START
from nodestep.flow.nodes import Node, NodeContext, node
from nodestep.flow.routing import Command, Send, branch, when
from nodestep.graph.graph import Graph
from nodestep.graph.options import RunOptions
from nodestep.state import BaseState, Replace, add, merge_dict, replace
from nodestep.store.base import BranchRecord, Lease, StateStore
from nodestep.store.checks import check_branch, check_records
from nodestep.store.filesystem import FilesystemStateStore
from nodestep.store.history import (
    History,
    HistoryEvent,
    HistoryStep,
    StateHistory,
    StateSnapshot,
)
from nodestep.store.memory import InMemoryStateStore
from nodestep.store.postgres import PostgresStateStore
from nodestep.store.sqlite import SQLiteStateStore
from nodestep.store.transfer import copy_thread, export_thread, import_thread
from nodestep.store.urls import open_store

__version__ = "0.1.0"

__all__ = [
    "END",
    "START",
    "BaseState",
    "BranchRecord",
    "Command",
    "ContextNotProvidedError",
    "FilesystemStateStore",
    "FinalEventData",
    "Graph",
    "GraphConfigError",
    "GraphExecutionError",
    "GraphInterrupt",
    "GraphResult",
    "GraphTimeoutError",
    "History",
    "HistoryEvent",
    "HistoryStep",
    "InMemoryStateStore",
    "InternalError",
    "Interrupt",
    "InterruptEventData",
    "InvalidUpdateError",
    "Lease",
    "Node",
    "NodeContext",
    "NodeTimeoutError",
    "NodestepError",
    "PostgresStateStore",
    "Replace",
    "Resume",
    "ResumeError",
    "RunLimitExceededError",
    "RunOptions",
    "SQLiteStateStore",
    "Send",
    "StateHistory",
    "StateSnapshot",
    "StateStore",
    "StateStoreError",
    "StateUpdateError",
    "StreamEvent",
    "ThreadBusyError",
    "ThreadConflictError",
    "UnknownThreadError",
    "add",
    "branch",
    "check_branch",
    "check_records",
    "copy_thread",
    "export_thread",
    "import_thread",
    "interrupt",
    "merge_dict",
    "node",
    "open_store",
    "replace",
    "when",
]

# A library logs, the application decides where it goes (the file store warns when it cuts
# a torn last line); without this, Python would print such warnings to stderr.
logging.getLogger("nodestep").addHandler(logging.NullHandler())
