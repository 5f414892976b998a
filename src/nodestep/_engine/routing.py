"""Resolve routes at run time: a node's own ``Command``/``Send`` targets, and its edges."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from nodestep._conditions.condition import CompiledCondition
from nodestep._conditions.env import NO_CONTEXT, Env
from nodestep._engine.task_input import task_input_route
from nodestep._errors import GraphExecutionError, StateStoreError, StateUpdateError
from nodestep._flow.edges import END, Terminal
from nodestep._flow.nodes import Node
from nodestep._flow.routing import Branch, Send, When
from nodestep._flow.validation import Flow, Join
from nodestep._state.schema import StateSchema
from nodestep._state.view import touched_fields
from nodestep._superstep.position import DeferredRoute, JoinRoute, Route, SendRoute, TaskResult

__all__ = ["Router"]


class Router:
    """Turns the targets a node chose, and the edges after it, into routes.

    Args:
        flow: The graph's routing tables.
        schema: The state schema, to check ``Send`` payloads.
        stores_json: Whether the run has a store; then payloads get their JSON form now,
            so a value without one fails the task that sent it.
        context: The run's ``context=``, which conditions may read.
    """

    def __init__(
        self,
        flow: Flow,
        schema: StateSchema,
        *,
        stores_json: bool,
        cache: dict[str, Any] | None = None,
        context: Any = NO_CONTEXT,
    ) -> None:
        self.flow = flow
        self.context = context
        self.schema = schema
        self.stores_json = stores_json
        # The tables depend on the flow only: a graph keeps them (``cache``) for its runs,
        # so a run does not pay for them per node.
        tables = None if cache is None else cache.get("router")
        if tables is None:
            tables = _tables(flow)
            if cache is not None:
                cache["router"] = tables
        self.goto_only: frozenset[str] = tables[0]
        """The nodes without an edge: each of their tasks must return a route."""
        self.deferred: frozenset[str] = tables[1]
        """The deferred nodes: routes to them are held (see ``_superstep.barriers``)."""
        self.static: dict[str, list[Route]] = tables[2]
        """The routes of each node whose edge does not look at the state."""

    def held(self, route: str | SendRoute) -> Route:
        """Return ``route``, held back when it goes to a deferred node."""
        return _held(route, self.deferred)

    def goto_routes(self, node: Node, goto: list[Any]) -> list[Route]:
        """Resolve a node's ``Command(goto=...)``/``Send`` targets; each must be declared."""
        declared = self.flow.declared[node.name]
        if len(goto) == 1 and type(goto[0]) is Node and not self.deferred:
            # The common case (``goto=node``), checked as the loop below checks it.
            target = goto[0]
            name = target.name
            if name not in declared:
                _check_declared(node, name, declared)
            if self.flow.nodes.get(name) is not target:
                self._check_same_node(node, target)
            return [name]
        routes: list[Route] = []
        for target in goto:
            if isinstance(target, Send):
                name = target.node_name
                _check_declared(node, name, declared)
                if isinstance(target.node, Node):
                    self._check_same_node(node, target.node)
                send = self.send_route(node.name, name, target.payload)
                routes.append(self.held(send) if self.deferred else send)
                continue
            if target is END:
                _check_declared(node, "END", declared)
                continue
            if isinstance(target, Node):
                name = target.name
                _check_declared(node, name, declared)
                self._check_same_node(node, target)
            elif isinstance(target, str):
                name = target
                _check_declared(node, name, declared)
            else:
                raise GraphExecutionError(
                    f"Node '{node.name}' routed to {target!r}; a goto target is a node, a node "
                    f"name, END or Send(node, payload)."
                )
            routes.append(self.held(name) if self.deferred else name)
        return routes

    def _target_routes(self, target: Node | Terminal) -> list[Route]:
        if isinstance(target, Node):
            return [self.held(target.name)]
        return []

    def _check_same_node(self, node: Node, target: Node) -> None:
        """Refuse a target that only shares its name with the flow's node of that name."""
        registered = self.flow.nodes.get(target.name)
        if registered is not target and registered is not None:
            given, ours = _where(target.fn), _where(registered.fn)
            if given == ours:  # e.g. node(obj.method) called twice: two objects, one name
                given = f"{given} (another node object)"
            raise GraphExecutionError(
                f"Node '{node.name}' routed to a node named '{target.name}' made from "
                f"{given}, but the flow's node '{target.name}' is made from {ours}. The name "
                f"would run the flow's node, not the one given: route to the node object "
                f"that is in the flow, or give the other function its own name with "
                f"@node(name=...) and add it to the flow."
            )

    def no_route_error(self, node: str) -> GraphExecutionError:
        """Return the error for a task of a node without edges that returned no route."""
        shown = ", ".join(sorted(self.flow.declared[node]))
        return GraphExecutionError(
            f"Node '{node}' has no edge and returned no route, so the run cannot tell what "
            f"runs next. A node without an edge routes only by what it returns: "
            f"Command(goto=...) or Send(...) with one of its declared targets ({shown}), or "
            f"END to stop this path. Return one of those, or add an edge such as "
            f"'{node} >> END'."
        )

    def send_route(self, writer: str, target: str, payload: dict[str, Any]) -> SendRoute:
        """Return the route of a ``Send`` from ``writer``, its payload checked.

        The payload of a node with an input model is that model's input; any other
        payload is laid over the state, so its keys must be state fields.
        """
        node = self.flow.nodes.get(target)
        if node is not None and node.input_model is not None:
            return task_input_route(writer, node, payload, stores_json=self.stores_json)
        fields = self.schema.fields
        typed: dict[str, Any] = {}
        for key, value in payload.items():
            spec = fields.get(key)
            if spec is None:
                raise StateUpdateError(
                    f"Node '{writer}' sent a payload to '{target}' with '{key}', which is not a "
                    f"field of {self.schema.cls.__name__}; payload keys must be state fields.",
                    field=key,
                    writer=writer,
                )
            try:
                typed[key] = spec.validate(value, writer)
            except StateUpdateError as error:
                raise StateUpdateError(
                    f"Node '{writer}' sent '{target}' an invalid payload: {error}",
                    field=key,
                    writer=writer,
                ) from error.__cause__
        as_json = None
        if self.stores_json:
            try:
                as_json = {k: fields[k].to_json(v) for k, v in typed.items()}
            except StateStoreError as error:
                raise StateStoreError(
                    f"Node '{writer}' sent '{target}' a payload that cannot be stored: {error}"
                ) from None
        return SendRoute(target, typed, as_json)

    def edge_routes(self, node: str, state: Any, result: TaskResult | None = None) -> list[Route]:
        """Resolve the edge, ``when`` or ``branch`` after ``node`` on the merged ``state``.

        ``result`` is the node's task result, which a condition reading ``output.`` needs.
        """
        static = self.static.get(node)
        if static is not None:
            return list(static)
        edge = self.flow.edges.get(node)
        if edge is None:
            return []
        if isinstance(edge, When):
            link = edge
            while True:
                predicate = link.predicate
                if isinstance(predicate, CompiledCondition):
                    verdict = self._condition_holds(predicate, state, result)
                else:  # a Python predicate, on the path it always took
                    originals = vars(state)
                    view = self.schema.view(originals)
                    # Graph.flow compiled every Condition, so this is a Python function.
                    verdict = predicate(view)  # type: ignore[operator]
                    _check_read_only(view, originals, "The when() predicate", predicate, node)
                    if not isinstance(verdict, bool):
                        raise _not_a_bool(node, verdict, predicate)
                nxt = link.target if verdict else link.otherwise
                if not isinstance(nxt, When):
                    return self._target_routes(nxt)
                link = nxt
        if isinstance(edge, Branch):
            originals = vars(state)
            view = self.schema.view(originals)
            key = edge.router(view)
            _check_read_only(view, originals, "The branch() router", edge.router, node)
            try:
                target = edge.mapping[key]
            except (KeyError, TypeError):
                if isinstance(key, list | tuple):  # not a key itself (a tuple may be one)
                    return self._fan_out(node, edge, key)
                raise _not_a_key(node, edge, key) from None
            return self._target_routes(target)
        raise GraphExecutionError(f"Unknown route after '{node}': {edge!r}")

    def _fan_out(self, node: str, edge: Branch, keys: list[Any] | tuple[Any, ...]) -> list[Route]:
        """Return the routes to each mapped target of ``keys``, a router's list of keys.

        LangGraph runs every target of a list a router returns, in the next superstep; so
        does nodestep. Each key must be in the mapping, which declared the targets when the
        flow compiled; a target named twice runs once, and ``[]`` routes nowhere.
        """
        routes: list[Route] = []
        for key in keys:
            try:
                target = edge.mapping[key]
            except (KeyError, TypeError):
                raise _not_a_key(node, edge, key, keys) from None
            for route in self._target_routes(target):
                if route not in routes:
                    routes.append(route)
        return routes

    def _condition_holds(
        self, predicate: CompiledCondition, state: Any, result: TaskResult | None
    ) -> bool:
        output = None
        if predicate.reads_output and result is not None:
            output = {key: value for key, value, _ in result.writes}
        return predicate.holds(Env(state, self.context, output))

    def error_routes(
        self, node: str, error: BaseException, values: dict[str, Any]
    ) -> list[Route] | None:
        """Return the route an error route after ``node`` gives its failure, or ``None``.

        Only conditions with ``$is_error`` are asked, in chain order, on the state the node
        read: a failed node wrote nothing, and a plain condition (``status == 'ok'``) must
        not send a failure down the path of a success.
        """
        edge = self.flow.edges.get(node)
        if not isinstance(edge, When):
            return None
        env: Env | None = None
        for link in edge.links():
            predicate = link.predicate
            if isinstance(predicate, CompiledCondition) and predicate.on_error:
                if env is None:
                    env = Env(self.schema.instance(values), self.context, None, error)
                if predicate.holds(env):
                    return self._target_routes(link.target)
        return None


def _not_a_key(node: str, edge: Branch, key: Any, keys: Any = None) -> GraphExecutionError:
    """Return the error for a ``branch()`` router's key that is not in its mapping."""
    known = ", ".join(repr(k) for k in edge.mapping)
    where = "" if keys is None else f" in the list {keys!r}"
    if isinstance(key, Send):
        # LangGraph's map-reduce idiom; a mapping cannot hold it, as a Send is no key.
        target = key.node_name
        return GraphExecutionError(
            f"The branch() router after '{node}' returned {key!r}{where}, but a router "
            f"returns keys of its mapping ({known}), never a Send. To fan out, send from "
            f"node '{node}' itself: return Command(goto=[Send('{target}', ...), ...]) (or "
            f"one Send) from it, declared as @node(goto=['{target}']), in place of the "
            f"branch()."
        )
    return GraphExecutionError(
        f"The branch() router after '{node}' returned {key!r}{where}, which is not a key of "
        f"its mapping ({known}). Return one of those keys (or a list of them, to run each), "
        f"or add {key!r} to the mapping."
    )


def _not_a_bool(node: str, verdict: Any, predicate: Any) -> Exception:
    return GraphExecutionError(
        f"The when() predicate after '{node}' returned {verdict!r}; it must return True or False."
    )


def _held(route: str | SendRoute, deferred: frozenset[str]) -> Route:
    target = route if isinstance(route, str) else route.node
    return DeferredRoute(route) if target in deferred else route


def _tables(flow: Flow) -> tuple[frozenset[str], frozenset[str], dict[str, list[Route]]]:
    """Return the nodes without an edge, the deferred nodes, and each static edge's routes."""
    goto_only = frozenset(n for n in flow.nodes if n not in flow.edges)
    deferred = frozenset(n for n, node in flow.nodes.items() if node.defer)
    static: dict[str, list[Route]] = {}
    for name, edge in flow.edges.items():
        if edge is END:
            static[name] = []
        elif isinstance(edge, str):
            static[name] = [_held(edge, deferred)]
        elif isinstance(edge, tuple):
            static[name] = [_held(n, deferred) for n in edge]
        elif isinstance(edge, Join):
            defer = edge.target in deferred
            static[name] = [JoinRoute(edge.target, name, edge.sources, defer)]
    return goto_only, deferred, static


def _check_declared(node: Node, name: str, declared: frozenset[str]) -> None:
    if name not in declared:
        shown = ", ".join(sorted(declared)) or "nothing"
        raise GraphExecutionError(
            f"Node '{node.name}' routed to '{name}', which is not declared in its "
            f"@node(goto=[...]) (declared: {shown}). Add it to goto= so the flow can be "
            f"checked and drawn."
        )


def _check_read_only(
    view: BaseModel, originals: dict[str, Any], what: str, fn: Any, node: str
) -> None:
    """Refuse a router or predicate that changed its copy of the state.

    It gets the same lazy copy a node gets (see ``_state.view``), so the change reached
    nothing; it is refused so that it is not silently lost.
    """
    changed = touched_fields(view, originals)
    if changed:
        fields = ", ".join(f"'{f}'" for f, _ in changed)
        raise GraphExecutionError(
            f"{what} {_where(fn)} after node '{node}' changed {fields} of the state in place. "
            f"Routers and predicates only read the state: they get a copy, so the change "
            f"would be lost. Make the change in a node (in '{node}', or in a node of its "
            f"own) and let the router read it."
        )


def _where(fn: Any) -> str:
    """Name a function by its module and qualified name, e.g. ``app.flows:triage``."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(qualname, str):
        return f"{module}:{qualname}" if isinstance(module, str) else qualname
    return repr(fn)
