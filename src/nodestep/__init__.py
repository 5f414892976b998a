"""nodestep: a superstep graph engine for agents and durable workflows.

Nodes are plain functions that read a typed state and return an update. The engine runs them
in supersteps, records every step as an event, and lets you pause, resume, fork and travel
back in time.
"""

import logging

from nodestep.conditions import Condition, failed
from nodestep.declarative import load_graph, manifest_json_schema
from nodestep.engine.interrupts import GraphInterrupt, Interrupt, Resume, interrupt
from nodestep.engine.results import (
    FinalEventData,
    GraphResult,
    InterruptEventData,
    StreamEvent,
)
from nodestep.errors import (
    ConditionError,
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

__version__ = "0.1.0"

__all__ = [
    "END",
    "START",
    "BaseState",
    "BranchRecord",
    "Command",
    "Condition",
    "ConditionError",
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
    "Replace",
    "Resume",
    "ResumeError",
    "RunLimitExceededError",
    "RunOptions",
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
    "failed",
    "interrupt",
    "load_graph",
    "manifest_json_schema",
    "merge_dict",
    "node",
    "replace",
    "when",
]

# A library logs, the application decides where it goes (the file store warns when it cuts
# a torn last line); without this, Python would print such warnings to stderr.
logging.getLogger("nodestep").addHandler(logging.NullHandler())
