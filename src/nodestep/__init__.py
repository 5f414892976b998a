"""nodestep: a superstep graph engine for agents and durable workflows.

Nodes are plain functions that read a typed state and return an update. The engine runs them
in supersteps, records every step as an event, and lets you pause, resume, fork and travel
back in time.
"""

import logging as _logging

from nodestep._conditions.condition import Condition, failed
from nodestep._declarative.format import manifest_json_schema
from nodestep._declarative.loader import load_graph
from nodestep._declarative.node_types import NodeDeclaration, NodeType
from nodestep._engine.history import (
    History,
    HistoryEvent,
    HistoryPage,
    HistoryStep,
    StateHistory,
    StateSnapshot,
)
from nodestep._engine.interrupts import GraphInterrupt, Interrupt, Resume, interrupt
from nodestep._engine.results import (
    FinalEventData,
    GraphResult,
    InterruptEventData,
    StreamEvent,
)
from nodestep._errors import (
    AgentGroupError,
    CircuitOpenError,
    ConditionError,
    ContextNotProvidedError,
    CredentialsError,
    GraphConfigError,
    GraphExecutionError,
    GraphTimeoutError,
    InternalError,
    InvalidUpdateError,
    ModelError,
    NodestepError,
    NodeTimeoutError,
    OpenAPICallError,
    ResumeError,
    RunLimitExceededError,
    StateStoreError,
    StateUpdateError,
    ThreadBusyError,
    ThreadConflictError,
    UnknownThreadError,
    WorkspaceError,
)
from nodestep._flow.agent_tasks import AgentResult, AgentTask
from nodestep._flow.cache_policy import CachePolicy
from nodestep._flow.credentials import Credentials, CredentialsProvider
from nodestep._flow.edges import END, START
from nodestep._flow.middleware import Middleware
from nodestep._flow.nodes import Node, NodeContext, node
from nodestep._flow.resilience import CircuitBreaker, RetryPolicy
from nodestep._flow.routing import PARENT, Command, Send, branch, when
from nodestep._flow.validation import Join
from nodestep._graph.graph import Graph
from nodestep._graph.options import RunOptions
from nodestep._graph.subgraph import subgraph
from nodestep._public import forward as _forward
from nodestep._public import publish as _publish
from nodestep._state.base import BaseState
from nodestep._state.reducers import Replace, add, merge_dict, replace

# The agent layer lives in nodestep.agents; these are what a first agent needs.
from nodestep.agents import (
    Agent,
    MessagesState,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    model_node,
    tool,
)
from nodestep.store import (
    FilesystemStateStore,
    InMemoryStateStore,
    PostgresStateStore,
    SQLiteStateStore,
    copy_thread,
    export_thread,
    import_thread,
    open_store,
)

__version__ = "0.1.0"

__all__ = [
    "END",
    "PARENT",
    "START",
    "Agent",
    "AgentGroupError",
    "AgentResult",
    "AgentTask",
    "BaseState",
    "CachePolicy",
    "CircuitBreaker",
    "CircuitOpenError",
    "Command",
    "Condition",
    "ConditionError",
    "ContextNotProvidedError",
    "Credentials",
    "CredentialsError",
    "CredentialsProvider",
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
    "HistoryPage",
    "HistoryStep",
    "InMemoryStateStore",
    "InternalError",
    "Interrupt",
    "InterruptEventData",
    "InvalidUpdateError",
    "Join",
    "MessagesState",
    "Middleware",
    "ModelError",
    "Node",
    "NodeContext",
    "NodeDeclaration",
    "NodeTimeoutError",
    "NodeType",
    "NodestepError",
    "OpenAPICallError",
    "PostgresStateStore",
    "Replace",
    "Resume",
    "ResumeError",
    "RetryPolicy",
    "RunLimitExceededError",
    "RunOptions",
    "SQLiteStateStore",
    "ScriptedModel",
    "ScriptedReply",
    "Send",
    "StateHistory",
    "StateSnapshot",
    "StateStoreError",
    "StateUpdateError",
    "StreamEvent",
    "ThreadBusyError",
    "ThreadConflictError",
    "UnknownThreadError",
    "WorkspaceError",
    "add",
    "branch",
    "copy_thread",
    "create_react_agent",
    "export_thread",
    "failed",
    "import_thread",
    "interrupt",
    "load_graph",
    "manifest_json_schema",
    "merge_dict",
    "model_node",
    "node",
    "open_store",
    "replace",
    "subgraph",
    "tool",
    "when",
]

# A library logs, the application decides where it goes (the file store warns when it cuts
# a torn last line); without this, Python would print such warnings to stderr.
_logging.getLogger("nodestep").addHandler(_logging.NullHandler())

_publish(__name__, __all__, globals())

# Names 0.1 exported here that now live on their package's face: they still resolve, with a
# DeprecationWarning naming the new import.
_MOVED = {
    "AnyMessage": "nodestep.agents",
    "AssistantMessage": "nodestep.agents",
    "ChatModel": "nodestep.agents",
    "MessageChunk": "nodestep.agents",
    "MessageList": "nodestep.agents",
    "Messages": "nodestep.agents",
    "ModelMemory": "nodestep.agents",
    "OpenAIChatModel": "nodestep.agents",
    "OpenAPITool": "nodestep.agents",
    "RemoveMessage": "nodestep.agents",
    "SystemMessage": "nodestep.agents",
    "Tool": "nodestep.agents",
    "ToolCall": "nodestep.agents",
    "ToolCallChunk": "nodestep.agents",
    "ToolMessage": "nodestep.agents",
    "UserMessage": "nodestep.agents",
    "add_messages": "nodestep.agents",
    "openapi_tools": "nodestep.agents",
    "retryable_model_error": "nodestep.agents",
    "tool_node": "nodestep.agents",
    "BranchRecord": "nodestep.store",
    "Lease": "nodestep.store",
    "StateStore": "nodestep.store",
    "ThreadInfo": "nodestep.store",
    "ThreadPage": "nodestep.store",
    "check_branch": "nodestep.store",
    "check_prune": "nodestep.store",
    "check_records": "nodestep.store",
    "page_threads": "nodestep.store",
    "prune_cut": "nodestep.store",
    "status_after": "nodestep.store",
}

__getattr__ = _forward(__name__, _MOVED)
