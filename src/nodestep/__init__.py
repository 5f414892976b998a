"""nodestep: a superstep graph engine for agents and durable workflows.

Nodes are plain functions that read a typed state and return an update. The engine runs them
in supersteps, records every step as an event, and lets you pause, resume, fork and travel
back in time.
"""

import logging

from nodestep._conditions.condition import Condition, failed
from nodestep._declarative.format import manifest_json_schema
from nodestep._declarative.loader import load_graph
from nodestep._engine.history import (
    History,
    HistoryEvent,
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
)
from nodestep._flow.cache_policy import CachePolicy
from nodestep._flow.credentials import Credentials, CredentialsProvider
from nodestep._flow.edges import END, START
from nodestep._flow.nodes import Node, NodeContext, node
from nodestep._flow.resilience import CircuitBreaker, RetryPolicy
from nodestep._flow.routing import PARENT, Command, Send, branch, when
from nodestep._flow.validation import Join
from nodestep._graph.graph import Graph
from nodestep._graph.options import RunOptions
from nodestep._graph.subgraph import subgraph
from nodestep._state.base import BaseState
from nodestep._state.reducers import Replace, add, merge_dict, replace

# The agent layer (messages, chat models, tools, the ReAct agent).
from nodestep.agents import (
    AnyMessage,
    AssistantMessage,
    ChatModel,
    MessageChunk,
    MessageList,
    Messages,
    MessagesState,
    ModelMemory,
    OpenAIChatModel,
    OpenAPITool,
    RemoveMessage,
    ScriptedModel,
    ScriptedReply,
    SystemMessage,
    Tool,
    ToolCall,
    ToolCallChunk,
    ToolMessage,
    UserMessage,
    add_messages,
    create_react_agent,
    model_node,
    openapi_tools,
    retryable_model_error,
    tool,
    tool_node,
)
from nodestep.store import (
    BranchRecord,
    FilesystemStateStore,
    InMemoryStateStore,
    Lease,
    PostgresStateStore,
    SQLiteStateStore,
    StateStore,
    ThreadInfo,
    ThreadPage,
    check_branch,
    check_prune,
    check_records,
    copy_thread,
    export_thread,
    import_thread,
    open_store,
    page_threads,
    prune_cut,
    status_after,
)

__version__ = "0.1.0"

__all__ = [
    "END",
    "PARENT",
    "START",
    "AnyMessage",
    "AssistantMessage",
    "BaseState",
    "BranchRecord",
    "CachePolicy",
    "ChatModel",
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
    "HistoryStep",
    "InMemoryStateStore",
    "InternalError",
    "Interrupt",
    "InterruptEventData",
    "InvalidUpdateError",
    "Join",
    "Lease",
    "MessageChunk",
    "MessageList",
    "Messages",
    "MessagesState",
    "ModelError",
    "ModelMemory",
    "Node",
    "NodeContext",
    "NodeTimeoutError",
    "NodestepError",
    "OpenAIChatModel",
    "OpenAPICallError",
    "OpenAPITool",
    "PostgresStateStore",
    "RemoveMessage",
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
    "StateStore",
    "StateStoreError",
    "StateUpdateError",
    "StreamEvent",
    "SystemMessage",
    "ThreadBusyError",
    "ThreadConflictError",
    "ThreadInfo",
    "ThreadPage",
    "Tool",
    "ToolCall",
    "ToolCallChunk",
    "ToolMessage",
    "UnknownThreadError",
    "UserMessage",
    "add",
    "add_messages",
    "branch",
    "check_branch",
    "check_prune",
    "check_records",
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
    "openapi_tools",
    "page_threads",
    "prune_cut",
    "replace",
    "retryable_model_error",
    "status_after",
    "subgraph",
    "tool",
    "tool_node",
    "when",
]

# A library logs, the application decides where it goes (the file store warns when it cuts
# a torn last line); without this, Python would print such warnings to stderr.
logging.getLogger("nodestep").addHandler(logging.NullHandler())
