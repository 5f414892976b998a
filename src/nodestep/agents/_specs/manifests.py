"""A specs folder read into typed specs, with every problem at its file, line and column.

``read_specs`` reads every ``*.yaml`` and ``*.yml`` file under the folder, at any depth,
in name order; a file may hold several documents (``---``). It checks everything it can
before anything is built: kinds and keys, names (one namespace for the nodes), the tools
an LLMNode lists (each once), edge targets and conditions, service accounts, and that a
tool's function can take the arguments it declares. All problems are raised together, so
a folder is loaded whole or not at all.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodestep._declarative.documents import plain
from nodestep._declarative.yaml_tree import Problems, Y, read_documents
from nodestep._errors import GraphConfigError
from nodestep._flow.credentials import Credentials
from nodestep._flow.nodes import NodeContext
from nodestep.agents._openapi import OpenAPITool
from nodestep.agents._specs.functions import Functions
from nodestep.agents._specs.kinds import (
    KINDS,
    AccountSpec,
    EdgeSpec,
    LLMSpec,
    NodeSpec,
    ToolSpec,
    read_account,
    read_node,
)
from nodestep.agents._specs.routing import Route, compile_when
from nodestep.agents._tools import Tool

__all__ = ["OPENAPI_PREFIX", "Specs", "read_specs"]

OPENAPI_PREFIX = "OpenAPI__"
"""What an OpenAPI tool's name starts with: ``OpenAPI__<operationId>``."""

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ROLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")


@dataclass
class Specs:
    """A folder's specs, checked.

    Attributes:
        nodes: Every node, by name.
        accounts: Every ServiceAccount, by name (inline ones too).
        routes: Each node's edges, compiled, in the order written.
    """

    nodes: dict[str, NodeSpec] = field(default_factory=dict)
    accounts: dict[str, AccountSpec] = field(default_factory=dict)
    routes: dict[str, list[Route]] = field(default_factory=dict)

    def account(self, spec: NodeSpec) -> AccountSpec | None:
        """Return the service account of ``spec``, or ``None``."""
        if isinstance(spec.auth, AccountSpec):
            return spec.auth
        if isinstance(spec.auth, Y):
            return self.accounts.get(spec.auth.value)
        return None


def read_specs(root: Path, functions: Functions, tools: Sequence[Any]) -> Specs:
    """Read and check the specs under ``root``, and the ``tools=`` given as objects.

    Raises:
        GraphConfigError: listing every problem, each at its file, line and column.
    """
    problems = functions.problems
    specs = Specs()
    first: dict[str, Y] = {}
    for doc, kind in _documents(root, problems):
        if kind == "ServiceAccount":
            account = read_account(doc, KINDS[kind], None, problems)
            if account is not None:
                _add(specs.accounts, first, account.name, account, doc, "ServiceAccount", problems)
            continue
        spec = read_node(doc, kind, problems, functions)
        if spec is not None:
            _add(specs.nodes, first, spec.name, spec, spec.where, "node", problems)
    for spec in _tool_specs(tools, problems):
        _add(specs.nodes, first, spec.name, spec, spec.where, "node", problems)
    _Checks(specs, problems, functions).run()
    problems.raise_if_any("The agent's specs have problems")
    return specs


def _documents(root: Path, problems: Problems) -> list[tuple[Y, str]]:
    if not root.is_dir():
        what = "does not exist" if not root.exists() else "is not a folder"
        raise GraphConfigError(f"The specs folder '{root}' {what}; pass the folder of YAML specs.")
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise GraphConfigError(f"The specs folder '{root}' holds no *.yaml or *.yml file.")
    out: list[tuple[Y, str]] = []
    for file in files:
        before = len(problems.items)
        docs = read_documents(file, problems)
        if not docs and len(problems.items) == before:
            problems.add(f"{file}:1:1", "the file is empty; write a spec in it, or remove it")
        for doc in docs:
            kind = _kind(doc, problems)
            if kind is not None:
                out.append((doc, kind))
    return out


def _kind(doc: Y, problems: Problems) -> str | None:
    if not isinstance(doc.value, dict):
        problems.add(doc, "a spec is a mapping with a 'kind', e.g. kind: LLMNode")
        return None
    kind = doc.value.get("kind")
    kinds = ", ".join(KINDS)
    if kind is None:
        problems.add(doc, f"a spec without a 'kind'; give it one of {kinds}")
        return None
    if not isinstance(kind.value, str) or kind.value not in KINDS:
        problems.add(kind, f"the kind {plain(kind)!r} is unknown; {_kind_hint(kind.value)}")
        return None
    return str(kind.value)


def _kind_hint(value: Any) -> str:
    """Return the fix for an unknown kind: the kind meant, or the kinds there are."""
    kinds = ", ".join(KINDS)
    if value == "Overlay":
        # Liman's design page shows overlays; Liman 0.1.0's loader skips them as unknown.
        return (
            f"overlays are not read (Liman 0.1.0 skips them too): write their keys in the "
            f"node's own document; the kinds are {kinds}"
        )
    meant = [k for k in KINDS if isinstance(value, str) and k.lower() == value.lower()]
    if meant:
        return f"kinds are written as they are spelled: did you mean '{meant[0]}'?"
    return f"the kinds are {kinds}"


def _add(
    into: dict[str, Any], first: dict[str, Y], name: str, item: Any, where: Y, what: str,
    problems: Problems,
) -> None:  # fmt: skip
    key = f"{what}:{name}"
    if key in first:
        problems.add(
            where,
            f"a second {what} named '{name}' (the first is at {first[key].at}); give each "
            f"{what} its own name",
        )
        return
    first[key] = where
    into[name] = item


def _tool_specs(tools: Sequence[Any], problems: Problems) -> list[ToolSpec]:
    if isinstance(tools, Tool) or not isinstance(tools, Sequence):
        raise GraphConfigError(
            f"Agent(tools=...) takes a list of tools (openapi_tools(...), @tool functions), "
            f"got {type(tools).__name__}."
        )
    out = []
    for item in tools:
        if not isinstance(item, Tool):
            raise GraphConfigError(
                f"Agent(tools=...) takes tools made with @tool or openapi_tools, got {item!r}."
            )
        name = f"{item.prefix}__{item.name}" if isinstance(item, OpenAPITool) else item.name
        where = Y(name, "tools=", 1, 1)
        spec = ToolSpec("ToolNode", name, where, description={"en": item.description}, tool=item)
        out.append(spec)
    return out


class _Checks:
    """The checks across specs: references, kinds of targets, functions' parameters."""

    def __init__(self, specs: Specs, problems: Problems, functions: Functions) -> None:
        self.specs = specs
        self.problems = problems
        self.functions = functions

    def run(self) -> None:
        for account in list(self.specs.accounts.values()):
            self.roles(account)
        for spec in self.specs.nodes.values():
            if isinstance(spec.auth, AccountSpec):
                self.roles(spec.auth)
            elif isinstance(spec.auth, Y) and spec.auth.value not in self.specs.accounts:
                known = ", ".join(sorted(self.specs.accounts)) or "none"
                self.problems.add(
                    spec.auth,
                    f"unknown service account '{spec.auth.value}' (ServiceAccounts: {known})",
                )
            if isinstance(spec, LLMSpec):
                self.tools(spec)
            if isinstance(spec, ToolSpec) and spec.func is not None:
                self.parameters(spec)
            self.specs.routes[spec.name] = [r for e in spec.edges if (r := self.route(spec, e))]

    def roles(self, account: AccountSpec) -> None:
        for role in account.providers:
            if not _ROLE.match(role):
                self.problems.add(
                    account.where,
                    f"credentials provider '{role}' is not a role name: letters, digits and "
                    f"_ . : / -, starting with a letter or digit",
                )

    def tools(self, spec: LLMSpec) -> None:
        known = sorted(n for n, s in self.specs.nodes.items() if isinstance(s, ToolSpec))
        first: dict[str, Y] = {}
        for y in spec.tools:
            if y.value in first:  # a model refuses a request that names a tool twice
                self.problems.add(
                    y,
                    f"LLMNode '{spec.name}' lists tool '{y.value}' twice (the first at "
                    f"{first[y.value].at}); list it once",
                )
                continue
            first[y.value] = y
            found = self.specs.nodes.get(y.value)
            if isinstance(found, ToolSpec) and _TOOL_NAME.match(y.value):
                continue
            if isinstance(found, ToolSpec):
                why = "models take letters, digits, '_' and '-', at most 64; rename the ToolNode"
            elif y.value.startswith(OPENAPI_PREFIX):
                why = "OpenAPI tools come from Agent(tools=openapi_tools(spec, base_url=...))"
            else:
                why = f"the ToolNodes are {', '.join(known) or 'none'}"
            self.problems.add(y, f"LLMNode '{spec.name}' lists unknown tool '{y.value}'; {why}")

    def route(self, spec: NodeSpec, edge: EdgeSpec) -> Route | None:
        target = self.specs.nodes.get(edge.target.value)
        if target is None:
            known = ", ".join(sorted(self.specs.nodes))
            self.problems.add(edge.target, f"unknown target '{edge.target.value}' (nodes: {known})")
            return None
        if edge.key == "llm_nodes" and not isinstance(target, LLMSpec):
            self.problems.add(edge.target, f"'{target.name}' is a {target.kind}, not an LLMNode")
            return None
        if isinstance(target, ToolSpec):
            self.problems.add(
                edge.target,
                f"'{target.name}' is a ToolNode: a tool runs when a model calls it; list it "
                f"in an LLMNode's tools instead",
            )
            return None
        if edge.when is None:
            return Route(target.name, None)
        return compile_when(edge.when, target.name, self.functions, self.problems)

    def parameters(self, spec: ToolSpec) -> None:
        """Check that the tool's function takes its arguments and needs nothing else."""
        try:
            signature = inspect.signature(spec.func)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        account = self.specs.account(spec)
        given = {a.name for a in spec.arguments}
        given |= {t.split(".")[0] for t, _ in (account.inject if account else [])}
        for param in signature.parameters.values():
            special = param.annotation in (NodeContext, Credentials, "NodeContext", "Credentials")
            kinds = (param.VAR_KEYWORD, param.VAR_POSITIONAL)
            if param.name in given or special or param.kind in kinds:
                continue
            if param.default is param.empty:
                self.problems.add(
                    spec.where,
                    f"the func of ToolNode '{spec.name}' needs the parameter '{param.name}', "
                    f"which is no declared argument and no injected value; declare it in "
                    f"'arguments' or give it a default",
                )
