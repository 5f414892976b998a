"""Assistants: one per graph, its id uuid5 of the graph's name, read-only.

nodestep has no assistant versions or per-assistant config: each served graph is its own
default assistant, as the reference server makes one for each graph it loads.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodestep import END, Graph
from nodestep.serve._bodies import AssistantSearch, check_select, parse, read_json
from nodestep.serve._service import Service
from nodestep.serve._shapes import assistant_id_of, iso, page_headers

__all__ = ["assistant_json", "routes"]

_EPOCH = iso(0.0)


def assistant_json(graph_id: str) -> dict[str, Any]:
    """Return the default assistant of a graph."""
    return {
        "assistant_id": assistant_id_of(graph_id),
        "graph_id": graph_id,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "name": graph_id,
        "description": None,
        "version": 1,
        "created_at": _EPOCH,
        "updated_at": _EPOCH,
    }


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _targets(route: Any) -> list[str]:
    """Return the nodes a route can lead to, ``__end__`` for ``END``."""
    if route is END or route is None:
        return ["__end__"]
    if isinstance(route, str):
        return [route]
    if isinstance(route, tuple | list):
        return [t for part in route for t in _targets(part)]
    if hasattr(route, "mapping"):  # a branch
        return [t for part in route.mapping.values() for t in _targets(part)]
    if hasattr(route, "otherwise"):  # a when
        return _targets(route.target) + _targets(route.otherwise)
    for name in ("target", "name"):  # a join, a node
        if isinstance(getattr(route, name, None), str):
            return [getattr(route, name)]
    return []


def graph_drawing(graph: Graph[Any]) -> dict[str, Any]:
    """Return the graph as the drawing JSON of ``GET /assistants/{id}/graph``."""
    nodes: list[dict[str, Any]] = [{"id": "__start__", "type": "schema", "data": "__start__"}]
    nodes += [{"id": name, "type": "runnable", "data": {"name": name}} for name in graph.nodes]
    nodes.append({"id": "__end__", "type": "schema", "data": "__end__"})
    edges = [{"source": "__start__", "target": graph.start, "conditional": False}]
    for source, route in graph.edges.items():
        conditional = not isinstance(route, str | tuple) and route is not END
        edges += [
            {"source": source, "target": target, "conditional": conditional}
            for target in _targets(route)
        ]
    for source, targets in graph.declared.items():
        edges += [
            {
                "source": source,
                "target": "__end__" if t in ("__end__", str(END)) else t,
                "conditional": True,
            }
            for t in sorted(targets)
        ]
    return {"nodes": nodes, "edges": edges}


async def _get(request: Request) -> Response:
    graph_id = _service(request).graph_id(request.path_params["assistant_id"])
    return JSONResponse(assistant_json(graph_id))


def _found(service: Service, body: AssistantSearch) -> list[dict[str, Any]]:
    """Return the assistants a search or a count matches, by graph id, name and metadata."""
    found = [assistant_json(name) for name in sorted(service.graphs)]
    part = None if body.name is None else body.name.casefold()
    found = [
        assistant
        for assistant in found
        if body.graph_id in (None, assistant["graph_id"])
        # A part of the name, in any case: as LangGraph's server matches a name.
        and (part is None or part in assistant["name"].casefold())
        and all(assistant["metadata"].get(k) == v for k, v in (body.metadata or {}).items())
    ]
    if body.sort_by is not None:  # newest first unless asked otherwise, as LangGraph's
        key = body.sort_by
        found.sort(key=lambda a: str(a[key]).casefold(), reverse=body.sort_order != "asc")
    return found


def _selected(body: AssistantSearch, assistants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return only the fields ``select`` names of each assistant.

    Raises:
        ApiError: 422, a field an assistant does not have.
    """
    if not body.select:
        return assistants
    fields = list(assistant_json(""))
    check_select(body.select, fields, "an assistant")
    return [{k: a[k] for k in fields if k in body.select} for a in assistants]


async def _search(request: Request) -> Response:
    service = _service(request)
    body = parse(AssistantSearch, await read_json(request, service.limits.max_depth))
    found = _found(service, body)
    return JSONResponse(
        _selected(body, found[body.offset : body.offset + body.limit]),
        headers=page_headers(len(found), body.offset, body.limit),
    )


async def _count(request: Request) -> Response:
    service = _service(request)
    body = parse(AssistantSearch, await read_json(request, service.limits.max_depth))
    return JSONResponse(len(_found(service, body)))


async def _graph(request: Request) -> Response:
    service = _service(request)
    graph_id = service.graph_id(request.path_params["assistant_id"])
    return JSONResponse(graph_drawing(service.graphs[graph_id]))


async def _schemas(request: Request) -> Response:
    service = _service(request)
    graph_id = service.graph_id(request.path_params["assistant_id"])
    schema = service.graphs[graph_id].state.model_json_schema()
    return JSONResponse(
        {
            "graph_id": graph_id,
            "input_schema": schema,
            "output_schema": schema,
            "state_schema": schema,
            "config_schema": None,
            "context_schema": None,
        }
    )


async def _subgraphs(request: Request) -> Response:
    _service(request).graph_id(request.path_params["assistant_id"])
    return JSONResponse({})


routes = [
    Route("/assistants/search", _search, methods=["POST"]),
    Route("/assistants/count", _count, methods=["POST"]),
    Route("/assistants/{assistant_id}", _get, methods=["GET"]),
    Route("/assistants/{assistant_id}/graph", _graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", _schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", _subgraphs, methods=["GET"]),
]
