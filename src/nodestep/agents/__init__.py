"""The agent layer: messages, chat models, tools (OpenAPI ones too), a ReAct agent, and
``Agent``, which runs a folder of Liman-format specs.

It is built on the public face of the layers below: an agent is an ordinary ``Graph``
whose nodes are made here, so threads, interrupts, forks and time travel work on it.
"""

from nodestep._engine.subagents import gather_agents, spawn_agents
from nodestep._errors import MCPSchemaError, MCPToolError
from nodestep._flow.agent_tasks import AgentHandle
from nodestep._public import publish as _publish
from nodestep.agents._anthropic_model import AnthropicChatModel
from nodestep.agents._conversation import (
    MessageList,
    Messages,
    MessagesState,
    add_messages,
    next_message_id,
)
from nodestep.agents._manifest_nodes import agent_node_types
from nodestep.agents._mcp import MCPClient, MCPTool
from nodestep.agents._mcp_server import mcp_server, serve_mcp
from nodestep.agents._messages import (
    AnyMessage,
    AssistantMessage,
    RemoveMessage,
    SystemMessage,
    TokenUsage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from nodestep.agents._middleware.approval import HumanApproval
from nodestep.agents._middleware.context import (
    ModelMiddlewareContext,
    ModelRequest,
    ToolMiddlewareContext,
)
from nodestep.agents._model_memory import ModelMemory
from nodestep.agents._model_node import model_node, retryable_model_error
from nodestep.agents._models import ChatModel, MessageChunk, ToolCallChunk
from nodestep.agents._openai_model import OpenAIChatModel
from nodestep.agents._openapi import OpenAPITool, openapi_tools
from nodestep.agents._react import create_react_agent
from nodestep.agents._scripted import ScriptedModel, ScriptedReply
from nodestep.agents._specs.agent import Agent
from nodestep.agents._specs.outcomes import AgentEvent, AgentStep, NodeState
from nodestep.agents._specs.streaming import AgentToken, AgentToolCall, AgentToolResult
from nodestep.agents._tool_context import ToolContext
from nodestep.agents._tool_node import tool_node
from nodestep.agents._tools import Tool, tool
from nodestep.agents._workspace.files import FileMap, WorkspaceFiles, WorkspaceState, merge_files
from nodestep.agents._workspace.folder import FolderWorkspace
from nodestep.agents._workspace.handle import Workspace
from nodestep.agents._workspace.tools import workspace_tools

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentHandle",
    "AgentStep",
    "AgentToken",
    "AgentToolCall",
    "AgentToolResult",
    "AnthropicChatModel",
    "AnyMessage",
    "AssistantMessage",
    "ChatModel",
    "FileMap",
    "FolderWorkspace",
    "HumanApproval",
    "MCPClient",
    "MCPSchemaError",
    "MCPTool",
    "MCPToolError",
    "MessageChunk",
    "MessageList",
    "Messages",
    "MessagesState",
    "ModelMemory",
    "ModelMiddlewareContext",
    "ModelRequest",
    "NodeState",
    "OpenAIChatModel",
    "OpenAPITool",
    "RemoveMessage",
    "ScriptedModel",
    "ScriptedReply",
    "SystemMessage",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallChunk",
    "ToolContext",
    "ToolMessage",
    "ToolMiddlewareContext",
    "UserMessage",
    "Workspace",
    "WorkspaceFiles",
    "WorkspaceState",
    "add_messages",
    "agent_node_types",
    "create_react_agent",
    "gather_agents",
    "mcp_server",
    "merge_files",
    "model_node",
    "next_message_id",
    "openapi_tools",
    "retryable_model_error",
    "serve_mcp",
    "spawn_agents",
    "tool",
    "tool_node",
    "workspace_tools",
]

_publish(__name__, __all__, globals())
