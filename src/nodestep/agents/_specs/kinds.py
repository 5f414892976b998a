"""The manifest kinds, each read from its YAML document into a typed spec.

A reader checks its document's keys and values and adds every problem at its file, line
and column; it returns a spec even when it found problems, so one load reports all of
them, and ``manifests`` raises before anything is built from a spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodestep._declarative.documents import plain
from nodestep._declarative.settings import node_keywords
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep.agents._specs.arguments import TYPES, ArgSpec
from nodestep.agents._specs.bundles import BundleError, normalize
from nodestep.agents._specs.functions import Functions

__all__ = [
    "KINDS",
    "AccountSpec",
    "EdgeSpec",
    "FunctionSpec",
    "LLMSpec",
    "NodeSpec",
    "ToolSpec",
    "read_account",
    "read_node",
]

_SETTINGS = ("retry", "circuit_breaker", "timeout")
_COMMON = ("kind", "name", "auth", "description", *_SETTINGS)
_EDGES = ("llm_nodes", "nodes")
KINDS: dict[str, tuple[str, ...]] = {
    "LLMNode": (*_COMMON, "prompts", "tools", "nodes"),
    "ToolNode": (*_COMMON, "func", "arguments", "triggers", "tool_prompt_template", *_EDGES),
    "FunctionNode": (*_COMMON, "func", "prompts", "nodes", "llm_nodes", "tools"),
    "Node": (*_COMMON, "func", "prompts", "nodes", "llm_nodes", "tools"),
    "ServiceAccount": ("kind", "name", "context", "credentials_provider", "credentials_providers"),
}
"""Each kind and the keys its documents may hold."""

_LATER_LIMAN = {
    "structured_output": (
        "Liman's structured_output (newer than Liman 0.1.0) is not read here: describe the "
        "JSON answer in the system prompt, or build the agent in Python with "
        "create_react_agent(response_format=...)"
    ),
    "to": (
        "Liman's 'to' edges (newer than Liman 0.1.0) are not read here: list them under "
        "'nodes' (or a ToolNode's 'llm_nodes') as names or {target, when}"
    ),
}
"""Keys of Liman releases after 0.1.0, and what to write instead, for a clearer refusal."""


@dataclass
class EdgeSpec:
    """An edge: ``target`` (a node name), and the ``when`` that must hold, if any.

    Attributes:
        target: The target's name, where it was written.
        when: The condition, where it was written, or ``None`` (always).
        key: ``nodes`` or ``llm_nodes``, the list it was written in.
    """

    target: Y
    when: Y | None
    key: str


@dataclass
class AccountSpec:
    """A ServiceAccount: values injected from the call's context, and credential roles.

    Attributes:
        name: Its name (an inline account gets ``<node>__ServiceAccount``).
        where: Its document or inline mapping.
        inject: ``(target, source)`` pairs: the function gets the context's value at the
            dotted ``source`` under the dotted ``target``.
        strict: Whether a missing context value is an error (else it is left out).
        providers: The credentials providers, which become the node's roles.
    """

    name: str
    where: Y
    inject: list[tuple[str, str]] = field(default_factory=list)
    strict: bool = True
    providers: tuple[str, ...] = ()


@dataclass
class NodeSpec:
    """What every node kind has.

    Attributes:
        kind: ``LLMNode``, ``ToolNode``, ``FunctionNode`` or ``Node``.
        name: Its name.
        where: Its document.
        options: ``node()`` keywords of its settings (``retry``, ``breaker``, ``timeout``).
        auth: Its service account's name (``Y``) or the inline account, or ``None``.
        edges: Its ``nodes`` and ``llm_nodes`` edges, in the order written.
        description: Its description bundle.
    """

    kind: str
    name: str
    where: Y
    options: dict[str, Any] = field(default_factory=dict)
    auth: Y | AccountSpec | None = None
    edges: list[EdgeSpec] = field(default_factory=list)
    description: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMSpec(NodeSpec):
    """An LLMNode: prompts (a bundle) and the ToolNodes it may call.

    Attributes:
        prompts: The prompts bundle; ``system`` is the system prompt.
        tools: The names of its tools, where written.
    """

    prompts: dict[str, Any] = field(default_factory=dict)
    tools: list[Y] = field(default_factory=list)


@dataclass
class ToolSpec(NodeSpec):
    """A ToolNode: a function the model may call, its arguments and how it is presented.

    Attributes:
        func: The function, or ``None`` for a tool given as a ``Tool`` object.
        tool: The ``Tool`` object (``Agent(tools=...)``), or ``None``.
        arguments: The declared arguments.
        triggers: Example requests, each a bundle, or one bundle of lists.
        template: The ``tool_prompt_template`` bundle.
    """

    func: Callable[..., Any] | None = None
    tool: Any = None
    arguments: tuple[ArgSpec, ...] = ()
    triggers: list[dict[str, Any]] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)


@dataclass
class FunctionSpec(NodeSpec):
    """A FunctionNode or Node: a Python function as a step of the flow.

    Attributes:
        func: The function.
    """

    func: Callable[..., Any] | None = None


class _Reader:
    """Reads one document's values, adding problems as it goes."""

    def __init__(self, problems: Problems, functions: Functions) -> None:
        self.problems = problems
        self.functions = functions

    def text(self, y: Y, what: str) -> str | None:
        if isinstance(y.value, str) and y.value.strip():
            return y.value
        self.problems.add(y, f"{what} must be a non-blank string, got {plain(y)!r}")
        return None

    def bundle(self, y: Y | None, what: str) -> dict[str, Any]:
        """Return the bundle at ``y``, or ``{}`` after adding a problem at its culprit.

        A null, here or at any leaf, is no text (see ``bundles``), as Liman reads it.
        """
        if y is None:
            return {}
        culprit = _not_text(y, ())
        if culprit is not None:
            bad, keys = culprit
            at = f" at {_dotted(keys)}" if keys else ""
            self.problems.add(
                bad,
                f"{what} is text, or a mapping of language codes (en, ru, ...) and keys to "
                f"text; got {plain(bad)!r}{at}: a value is text, a number, a list of them, "
                f"or null for none",
            )
            return {}
        try:
            return normalize(plain(y))
        except BundleError as error:
            self.problems.add(_under(y, error.path), f"{what}: {error}")
            return {}

    def names(self, y: Y | None, what: str) -> list[Y]:
        if y is None:
            return []
        if not isinstance(y.value, list):
            self.problems.add(y, f"'{what}' is a list of names, got {plain(y)!r}")
            return []
        return [item for item in y.value if self.text(item, f"an item of '{what}'")]

    def edges(self, data: dict[str, Y], key: str) -> list[EdgeSpec]:
        y = data.get(key)
        if y is None:
            return []
        if not isinstance(y.value, list):
            self.problems.add(y, f"'{key}' is a list of node names or {{target, when}} edges")
            return []
        out = []
        for item in y.value:
            if isinstance(item.value, str):
                out.append(EdgeSpec(item, None, key))
                continue
            if not isinstance(item.value, dict) or "target" not in item.value:
                self.problems.add(item, f"an edge of '{key}' is a node name or {{target, when}}")
                continue
            self.keys(item, ("target", "when", "id", "depends"), "an edge")
            self.edge_ids(item.value)
            target = item.value["target"]
            if isinstance(target.value, list):
                self.problems.add(
                    target,
                    f"an edge's target is one node name, got the list {plain(target)!r}: "
                    f"Liman 0.1.0 reads target as one name too (its docs show a list), and "
                    f"the first edge that holds is the one taken, so write one edge per "
                    f"target, each with its own when",
                )
            elif self.text(target, "an edge's target"):
                out.append(EdgeSpec(target, item.value.get("when"), key))
        return out

    def edge_ids(self, edge: dict[str, Y]) -> None:
        """Check an edge's ``id`` and ``depends``, which nothing acts on.

        Liman 0.1.0 reads both (``EdgeSpec.id_: str | None``, ``depends: list[str] |
        None``) and never uses them: its docs say an edge with ``depends`` is followed
        only once the edges it names are resolved, and its runtime follows the edge
        regardless. They are accepted here so such a folder loads, and they are checked
        for shape only: nodestep does not act on them either (see the docs).
        """
        y = edge.get("id")
        if y is not None and y.value is not None:
            self.text(y, "an edge's id")
        y = edge.get("depends")
        if y is None or y.value is None:
            return
        items = y.value if isinstance(y.value, list) else [y]
        for item in items:
            if not (isinstance(item.value, str) and item.value.strip()):
                self.problems.add(
                    item,
                    f"an edge's depends is an edge id or a list, got {plain(item)!r}",
                )

    def keys(self, y: Y, allowed: tuple[str, ...], what: str) -> None:
        for key, value in y.value.items():
            if key not in allowed:
                known = f"the keys are {', '.join(allowed)}"
                hint = _LATER_LIMAN.get(key)
                self.problems.add(
                    value, f"unknown key '{key}' in {what}; {f'{hint}; ' if hint else ''}{known}"
                )

    def flag(self, y: Y | None, what: str, default: bool) -> bool:
        if y is None:
            return default
        if isinstance(y.value, bool):
            return y.value
        self.problems.add(y, f"'{what}' takes true or false, got {plain(y)!r}")
        return default


def _not_text(y: Y, keys: tuple[str, ...]) -> tuple[Y, tuple[str, ...]] | None:
    """Return the first value under ``y`` a bundle cannot hold, and its keys, or ``None``."""
    if isinstance(y.value, dict):
        items: Any = y.value.items()
    elif isinstance(y.value, list):
        items = ((f"[{i}]", item) for i, item in enumerate(y.value))
    elif isinstance(y.value, bool):  # before int: a bool is an int
        return y, keys
    elif y.value is None or isinstance(y.value, str | int | float):
        return None
    else:
        return y, keys
    for key, item in items:
        found = _not_text(item, (*keys, str(key)))
        if found is not None:
            return found
    return None


def _dotted(keys: tuple[str, ...]) -> str:
    """Return ``keys`` as a reader writes them: ``notes.en.b``, ``triggers[1]``."""
    return "".join(k if k.startswith("[") else f".{k}" for k in keys).removeprefix(".")


def _under(y: Y, keys: tuple[str, ...]) -> Y:
    """Return the value at ``keys`` under ``y`` (as far as they lead)."""
    for key in keys:
        if not isinstance(y.value, dict) or key not in y.value:
            break
        y = y.value[key]
    return y


def read_node(doc: Y, kind: str, problems: Problems, functions: Functions) -> NodeSpec | None:
    """Read a node document of ``kind``; ``None`` when it has no usable name."""
    reader = _Reader(problems, functions)
    data: dict[str, Y] = doc.value
    one = f"{'an' if kind == 'LLMNode' else 'a'} {kind}"  # "an LLMNode", said "an el-el-em"
    reader.keys(doc, KINDS[kind], one)
    name_y = data.get("name")
    if name_y is None:
        problems.add(doc, f"{one} needs a 'name'")
        return None
    name = reader.text(name_y, f"{one}'s name")
    if name is None:
        return None
    settings = {k: v for k, v in data.items() if k in _SETTINGS}
    common: dict[str, Any] = {
        "kind": kind,
        "name": name,
        "where": name_y,
        "options": node_keywords(settings, functions.importer, problems),
        "auth": _auth(data.get("auth"), name, reader),
        "edges": [edge for key in data if key in _EDGES for edge in reader.edges(data, key)],
        "description": reader.bundle(data.get("description"), f"the description of '{name}'"),
    }
    if kind == "LLMNode":
        prompts = reader.bundle(data.get("prompts"), f"the prompts of '{name}'")
        tools = reader.names(data.get("tools"), "tools")
        return LLMSpec(**common, prompts=prompts, tools=tools)
    func = _func(data, doc, kind, name, reader)
    if kind == "ToolNode":
        args = _arguments(data.get("arguments"), reader)
        triggers = _triggers(data.get("triggers"), reader)
        template = reader.bundle(data.get("tool_prompt_template"), "tool_prompt_template")
        return ToolSpec(**common, func=func, arguments=args, triggers=triggers, template=template)
    return FunctionSpec(**common, func=func)


def _func(
    data: dict[str, Y], doc: Y, kind: str, name: str, reader: _Reader
) -> Callable[..., Any] | None:
    y = data.get("func")
    if y is None:
        reader.problems.add(
            doc,
            f"{kind} '{name}' has no 'func': name the Python function it runs, e.g. "
            f"func: app.tools.{name}, or pass it in functions=",
        )
        return None
    return reader.functions.resolve(y, f"the func of {kind} '{name}'")


def _arguments(y: Y | None, reader: _Reader) -> tuple[ArgSpec, ...]:
    if y is None:
        return ()
    if not isinstance(y.value, list):
        reader.problems.add(y, "'arguments' is a list of {name, type, description, optional}")
        return ()
    out: list[ArgSpec] = []
    seen: set[str] = set()
    for item in y.value:
        arg = _argument(item, reader)
        if arg is None:
            continue
        if arg.name in seen:
            reader.problems.add(item, f"a second argument named '{arg.name}'; give each its own")
            continue
        seen.add(arg.name)
        out.append(arg)
    return tuple(out)


def _argument(y: Y, reader: _Reader) -> ArgSpec | None:
    if not isinstance(y.value, dict) or "name" not in y.value or "type" not in y.value:
        reader.problems.add(y, "an argument is a mapping with a 'name' and a 'type'")
        return None
    keys = ("name", "type", "description", "optional", "required", "properties")
    reader.keys(y, keys, "an argument")
    data: dict[str, Y] = y.value
    name = reader.text(data["name"], "an argument's name")
    if name is not None and not name.isidentifier():
        reader.problems.add(data["name"], f"argument name '{name}' is not a Python identifier")
        name = None
    types = _types(data["type"], reader)
    optional = reader.flag(data.get("optional"), "optional", False)
    if "required" in data:
        optional = not reader.flag(data["required"], "required", True)
    props: tuple[ArgSpec, ...] = ()
    if "properties" in data:
        if types != ("object",):
            reader.problems.add(data["properties"], "'properties' is for arguments of type object")
        props = _arguments(data["properties"], reader)
    if name is None or not types:
        return None
    description = reader.bundle(data.get("description"), f"the description of '{name}'")
    return ArgSpec(name, types, description, optional, props)


def _types(y: Y, reader: _Reader) -> tuple[str, ...]:
    items = y.value if isinstance(y.value, list) else [y]
    names = tuple(item.value for item in items)
    bad = [
        plain(item) for item in items if not isinstance(item.value, str) or item.value not in TYPES
    ]
    if bad or not names:
        shown = bad[0] if bad else None
        reader.problems.add(y, f"unknown argument type {shown!r}; the types are {', '.join(TYPES)}")
        return ()
    return names


def _triggers(y: Y | None, reader: _Reader) -> list[dict[str, Any]]:
    """Return the triggers as bundles; a bundle of lists becomes one bundle per language."""
    if y is None:
        return []
    if isinstance(y.value, dict):  # {en: [...], ru: [...]}: one bundle of lists
        by_lang = reader.bundle(y, "triggers")
        return [by_lang] if by_lang else []
    if not isinstance(y.value, list):
        reader.problems.add(y, "'triggers' is a list of example requests")
        return []
    return [b for item in y.value if (b := reader.bundle(item, "a trigger"))]


def _auth(y: Y | None, node: str, reader: _Reader) -> Y | AccountSpec | None:
    if y is None:
        return None
    if not isinstance(y.value, dict) or "service_account" not in y.value:
        reader.problems.add(y, "'auth' is a mapping with 'service_account' (a name or a mapping)")
        return None
    reader.keys(y, ("service_account",), "'auth'")
    account = y.value["service_account"]
    if isinstance(account.value, str):
        return account if reader.text(account, "a service account's name") else None
    if not isinstance(account.value, dict):
        reader.problems.add(account, "'service_account' is a name or a ServiceAccount mapping")
        return None
    keys = tuple(k for k in KINDS["ServiceAccount"] if k != "kind")
    return read_account(account, keys, f"{node}__ServiceAccount", reader.problems)


def read_account(
    doc: Y, keys: tuple[str, ...], default_name: str | None, problems: Problems
) -> AccountSpec | None:
    """Read a ServiceAccount document, or an inline one (then ``default_name`` names it)."""
    reader = _Reader(problems, None)  # type: ignore[arg-type]  # reads no functions
    reader.keys(doc, keys, "a ServiceAccount")
    data: dict[str, Y] = doc.value
    name = reader.text(data["name"], "a ServiceAccount's name") if "name" in data else default_name
    if name is None:
        problems.add(doc, "a ServiceAccount needs a 'name'")
        return None
    account = AccountSpec(name, doc)
    one, many = data.get("credentials_provider"), data.get("credentials_providers")
    if one is not None and many is not None:
        problems.add(many, "give credentials_provider or credentials_providers, not both")
    if one is not None and reader.text(one, "credentials_provider"):
        account.providers = (one.value,)
    elif many is not None:
        account.providers = tuple(y.value for y in reader.names(many, "credentials_providers"))
    context = data.get("context")
    if context is not None:
        _context(context, account, reader)
    if context is None and one is None and many is None:
        problems.add(
            doc,
            f"ServiceAccount '{name}' gives nothing: add 'context: {{inject: [...]}}' or "
            f"'credentials_provider: <name>'",
        )
    return account


def _context(y: Y, account: AccountSpec, reader: _Reader) -> None:
    if not isinstance(y.value, dict) or "inject" not in y.value:
        reader.problems.add(y, "'context' is a mapping with 'inject' (a list) and 'strict'")
        return
    reader.keys(y, ("inject", "strict"), "a ServiceAccount's context")
    account.strict = reader.flag(y.value.get("strict"), "strict", True)
    inject = y.value["inject"]
    if not isinstance(inject.value, list) or not inject.value:
        reader.problems.add(inject, "'inject' is a non-empty list, e.g. [user_id: user.id, org]")
        return
    for item in inject.value:
        pair = _injected(item)
        if pair is None:
            reader.problems.add(
                item,
                f"an injected value is a dotted name (organization.id) or 'target: source' "
                f"(user_id: user.id), got {plain(item)!r}",
            )
            continue
        account.inject.append(pair)


def _injected(y: Y) -> tuple[str, str] | None:
    if isinstance(y.value, dict) and len(y.value) == 1:
        ((target, source),) = y.value.items()
        pair = (target, source.value)
    elif isinstance(y.value, str):
        target, colon, source = y.value.partition(":")
        pair = (target, source) if colon else (y.value, y.value)
    else:
        return None
    target, source = (str(part).strip() for part in pair)
    dotted = all(p.isidentifier() for p in target.split(".") + source.split("."))
    return (target, source) if dotted else None
