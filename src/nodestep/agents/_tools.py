"""Tools: functions a model may call, with arguments checked against their signature.

``@tool`` reads the function's signature into a pydantic model, so the arguments a model
writes are validated (and converted: ``"3"`` for an ``int``) before the function runs, and
the model is given the JSON schema of that same model. The docstring's first paragraph
describes the tool; its ``Args:`` section describes the arguments. A parameter annotated
``MemoryStore`` is no argument of the model's: the tool node passes the run's memory store
(``ctx.memory``) there, and one annotated ``ToolContext`` gets the context of the call;
nor is one annotated ``Workspace``: the tool node passes the call's view of the
thread's files there.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, overload

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import NodeContext
from nodestep._memory.contract import MemoryStore
from nodestep.agents._tool_context import ToolContext
from nodestep.agents._workspace.handle import Workspace, binds

__all__ = ["Tool", "tool", "tools_by_name"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARG_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\(.*?\))?:\s*(.+)$")


def _doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """Return a docstring's first paragraph and its ``Args:`` descriptions.

    Only the function's own docstring: ``inspect.getdoc`` would take an overridden method's
    from its base class, which describes another function to the model.
    """
    own = fn.__doc__
    doc = inspect.cleandoc(own) if isinstance(own, str) else ""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    args: dict[str, str] = {}
    lines = doc.splitlines()
    if "Args:" in lines:
        for line in lines[lines.index("Args:") + 1 :]:
            if line and not line.startswith(" "):
                break
            found = _ARG_LINE.match(line)
            if found:
                args[found.group(1)] = found.group(2).strip()
    return summary, args


def _check_annotation(tool_name: str, param: str, annotation: Any) -> None:
    """Refuse a parameter without a type, or one that asks for the node's context."""
    if annotation is inspect.Parameter.empty:
        raise GraphConfigError(
            f"Tool {tool_name!r}: parameter {param!r} has no type annotation. The model is "
            f"told each parameter's type and its arguments are checked against it: annotate "
            f"it, e.g. {param}: str."
        )
    if annotation is NodeContext:
        raise GraphConfigError(
            f"Tool {tool_name!r}: parameter {param!r} asks for the NodeContext, which a tool "
            f"does not get: a tool's arguments all come from the model. Annotate it "
            f"ToolContext instead (thread, state, memory store, stream writer, context=), or "
            f"give the tool what it needs in a closure."
        )


class Tool:
    """A function a model may call, made by ``@tool``.

    Calling a ``Tool`` calls the function. A tool node runs it with ``ainvoke``.

    Attributes:
        name: The name the model calls it by.
        description: What it does, for the model.
        args_model: The pydantic model of its arguments.
        fn: The function.
        approve: Whether a call waits for a person's approval (see ``tool_node``).
        roles: The roles whose credentials a call uses; the tool node declares them.
        memory_param: The parameter annotated ``MemoryStore``, which gets the run's
            memory store rather than a model's argument; ``None`` if there is none.
        context_param: The parameter annotated ``ToolContext``, which gets the context of
            the call rather than a model's argument; ``None`` if there is none.
        workspace_param: The parameter annotated ``Workspace``, which gets the call's
            workspace rather than a model's argument; ``None`` if there is none.
    """

    roles: tuple[str, ...] = ()
    memory_param: str | None = None
    context_param: str | None = None
    workspace_param: str | None = None

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        approve: bool = False,
    ) -> None:
        if not inspect.isfunction(fn) and not inspect.ismethod(fn):
            raise TypeError(f"@tool takes a function, got {type(fn).__name__}: {fn!r}")
        self.fn: Callable[..., Any] = fn
        self.name = fn.__name__ if name is None else name
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            given = "" if name is None else f"@tool(name={name!r}): "
            raise GraphConfigError(
                f"{given}Tool name {self.name!r} is not allowed: models take 1 to 64 letters, "
                f"digits, '_' and '-'. Pass @tool(name=...) with such a name."
            )
        summary, arg_docs = _doc_parts(fn)
        self.description = description or summary
        if not self.description:
            raise GraphConfigError(
                f"Tool {self.name!r} has no description, and the model needs one to know "
                f"when to call it: give the function a docstring, or pass @tool(description=...)."
            )
        self.approve = approve
        self.is_async = inspect.iscoroutinefunction(fn)
        self.args_model = self._args_model(fn, arg_docs)
        self._schema = self.args_model.model_json_schema()
        self._schema.pop("title", None)

    def _args_model(self, fn: Callable[..., Any], docs: dict[str, str]) -> type[BaseModel]:
        fields: dict[str, Any] = {}
        hints = inspect.get_annotations(fn, eval_str=True)
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise GraphConfigError(
                    f"Tool {self.name!r}: parameter {param.name!r} is {param.kind.description}; "
                    f"a model passes arguments by name, so use plain named parameters."
                )
            annotation = hints.get(param.name, param.empty)
            if annotation is MemoryStore:
                self.memory_param = param.name
                continue
            if annotation is ToolContext:
                self.context_param = param.name
                continue
            if binds(annotation):
                self.workspace_param = param.name
                continue
            _check_annotation(self.name, param.name, annotation)
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
        config = ConfigDict(extra="forbid")
        return create_model(f"{self.name}_args", __config__=config, **fields)

    @property
    def spec(self) -> dict[str, Any]:
        """The tool as a model is told of it: ``name``, ``description``, ``parameters``."""
        return {"name": self.name, "description": self.description, "parameters": self._schema}

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Return ``args`` checked and converted against the signature.

        Raises:
            pydantic.ValidationError: an argument is missing, unknown or of the wrong type.
        """
        return dict(self.args_model.model_validate(args).__dict__)  # the fields, no extras

    async def ainvoke(
        self,
        args: dict[str, Any],
        *,
        inline: bool = False,
        ctx: NodeContext | None = None,
        state: Any = None,
        call_id: str = "",
        workspace: Workspace | None = None,
    ) -> Any:
        """Validate ``args`` and run the tool (a plain ``def`` in a worker thread).

        Args:
            args: The arguments, as the model wrote them.
            inline: Run a plain ``def`` tool on the event loop's thread instead: a thread
                hop costs more than a quick tool, and a lone call has nothing to stall.
            ctx: The tool node's context; a ``@tool`` function does not get it, but its
                ``MemoryStore`` parameter gets ``ctx.memory``; a tool with ``roles`` (e.g.
                an OpenAPI operation) asks it for credentials.
            state: The state the tool node saw, for a ``ToolContext`` parameter.
            call_id: The id of the call, for a ``ToolContext`` parameter.
            workspace: The workspace its ``Workspace`` parameter gets (the tool node
                gives each call its own).

        Raises:
            pydantic.ValidationError: the arguments do not fit the signature.
            GraphConfigError: the tool takes the memory store or a ``ToolContext`` and no
                ``ctx`` was given, or the workspace and no ``workspace``.
            ContextNotProvidedError: the tool takes the memory store and the run has none.
            Exception: whatever the function raises.
        """
        kwargs = self.validate(args)
        if self.memory_param is not None:
            if ctx is None:
                raise GraphConfigError(
                    f"Tool {self.name!r} takes the memory store (parameter "
                    f"{self.memory_param!r}), which comes from the run: run it in a "
                    f"tool_node, or pass ctx=."
                )
            kwargs[self.memory_param] = ctx.memory
        if self.context_param is not None:
            if ctx is None:
                raise GraphConfigError(
                    f"Tool {self.name!r} takes a ToolContext (parameter "
                    f"{self.context_param!r}), which comes from the run: run it in a "
                    f"tool_node, or pass ctx=."
                )
            kwargs[self.context_param] = ToolContext(ctx, state, call_id, self.name)
        if self.workspace_param is not None:
            if workspace is None:
                raise GraphConfigError(
                    f"Tool {self.name!r} takes the workspace (parameter "
                    f"{self.workspace_param!r}): run it in a tool_node, or pass workspace=."
                )
            kwargs[self.workspace_param] = workspace
        if self.is_async:
            return await self.fn(**kwargs)
        if inline:
            return self.fn(**kwargs)
        return await anyio.to_thread.run_sync(lambda: self.fn(**kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, approve: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approve: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool a model may call.

    Use it bare (``@tool``) or with options (``@tool(approve=True)``).

    Args:
        fn: The function: ``def`` or ``async def``, with named, annotated parameters.
        name: The name the model calls it by; defaults to the function's name.
        description: What it does; defaults to the first paragraph of the function's own
            docstring (not one it inherits).
        approve: Make each call wait for a person's approval (an interrupt).

    Returns:
        The ``Tool``, or a decorator that makes one.

    Raises:
        TypeError: ``fn`` is not a function.
        GraphConfigError: a bad name (``""`` too), no description of its own, a parameter
            without a type annotation or annotated ``NodeContext``, or ``*args``/``**kwargs``.
    """
    if fn is None:
        return lambda f: Tool(f, name=name, description=description, approve=approve)
    return Tool(fn, name=name, description=description, approve=approve)


def check_tool_list(tools: Any, where: str) -> None:
    """Refuse ``tools`` unless it is a collection of tools (a list, a tuple, ...).

    Why: one tool or a name given where a list belongs would be iterated (a name letter
    by letter) or fail with Python's own TypeError, naming neither the place nor the fix.

    Raises:
        GraphConfigError: ``tools`` is a tool, a str, or not iterable.
    """
    if isinstance(tools, Tool | str | bytes) or not isinstance(tools, Iterable):
        if isinstance(tools, Tool):
            shown, one = f"the one tool {tools.name!r}", f"[{tools.name}]"
        else:
            shown, one = f"{type(tools).__name__} {tools!r:.60}", "[search, ...]"
        raise GraphConfigError(
            f"{where} takes a list of tools, got {shown}; pass a list, e.g. {one}, or [] for none."
        )


def tools_by_name(tools: Iterable[Any], not_a_tool: str) -> dict[str, Tool]:
    """Return ``tools`` by name, in their order.

    Args:
        tools: What the caller was given as tools.
        not_a_tool: The error for an item that is not a ``Tool``, with ``{item!r}`` where
            the item goes: it names the API that was given it.

    Raises:
        GraphConfigError: an item is not a ``Tool``, or two tools share a name.
    """
    check_tool_list(tools, not_a_tool.split(" takes ", 1)[0])
    by_name: dict[str, Tool] = {}
    for item in tools:
        if not isinstance(item, Tool):
            raise GraphConfigError(not_a_tool.format(item=item))
        if item.name in by_name:
            raise GraphConfigError(f"Two tools are named {item.name!r}; give one another name.")
        by_name[item.name] = item
    return by_name


def argument_problem(error: ValidationError) -> str:
    """Return a short account of what is wrong with a call's arguments, for the model."""
    problems = []
    for detail in error.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in detail.get("loc", ())) or "arguments"
        problems.append(f"{where}: {detail.get('msg', 'invalid')}")
    return "; ".join(problems)
