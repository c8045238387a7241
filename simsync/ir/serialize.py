"""A graph as plain data (JSON-ready dicts) and back: how a graph crosses a process boundary.

Only data crosses: devices, links, variables, resources, ops, tensors and clients as dicts of
numbers, strings and lists. Reading one back builds every object through its constructor (which
checks its values), adds it to the graph (which refuses a name given twice) and validates the
graph, so a malformed description is a :class:`~simsync.errors.GraphError`, never code that
runs (unlike a pickle) nor numbers simulated wrongly. The IR knows nothing of kinds: pass the
kind-aware check (``check=simsync.kinds.check_graph``) to refuse unknown kinds too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from simsync.errors import GraphError
from simsync.ir.graph import Graph
from simsync.ir.objects import (
    BatchFacts,
    Client,
    Cost,
    Device,
    GraphFacts,
    Link,
    Op,
    Resource,
    Tensor,
    Variable,
)
from simsync.ir.validate import validate

__all__ = ["graph_from_dict", "graph_to_dict"]


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The graph as a JSON-ready dict; :func:`graph_from_dict` reads it back.

    >>> g = Graph(name="tiny")
    >>> g.add_device(Device("/gpu:0"))
    >>> forward = g.add_op(Op("forward", "forward", "/gpu:0", Cost(0.002)))
    >>> g.add_client(Client("main", fetches=("forward",)))
    >>> again = graph_from_dict(graph_to_dict(g))
    >>> again.op("forward").cost.mean, again.clients[0].fetches
    (0.002, ('forward',))
    """
    return {
        "name": graph.name,
        "link": _plain(graph.link),
        "links": [[a, b, _plain(link)] for (a, b), link in graph.links.items()],
        "devices": [_plain(d) for d in graph.devices.values()],
        "variables": [_plain(v) for v in graph.variables.values()],
        "resources": [_plain(r) for r in graph.resources.values()],
        "ops": [_plain(op) for op in graph.ops()],
        "tensors": [_plain(t) for t in graph.edges()],
        "clients": [_plain(c) for c in graph.clients],
        "facts": _plain(graph.facts),
        "host_cores": dict(graph.host_cores),
        "core_efficiency": dict(graph.core_efficiency),
    }


def graph_from_dict(data: dict[str, Any], check: Callable[[Graph], None] = validate) -> Graph:
    """Build the graph ``data`` describes and ``check`` it: by default the structural
    :func:`~simsync.ir.validate`; the IR sits below the kinds, so the kind-aware check (unknown
    kinds, resources, every op run by a client) is passed in by whoever reads a graph that
    will run: ``graph_from_dict(data, check=functools.partial(check_graph, values=False))``
    with :func:`simsync.kinds.check_graph`.

    Raises
    ------
    GraphError
        ``data`` is no graph description, or ``check`` refused the graph.

    Examples
    --------
    >>> graph_from_dict({"ops": [{"name": "a", "kind": "forward", "device": "/x"}]})
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: op 'a' is placed on unknown device '/x'...
    """
    try:
        graph = Graph(name=str(data.get("name", "graph")), link=_make(Link, data.get("link", {})))
        for a, b, link in data.get("links", []):
            graph.set_link(str(a), str(b), _make(Link, link))
        for item in data.get("devices", []):
            graph.add_device(_make(Device, item))
        for item in data.get("variables", []):
            graph.add_variable(_make(Variable, item))
        for item in data.get("resources", []):
            graph.add_resource(_make(Resource, item))
        for item in data.get("ops", []):
            graph.add_op(_make(Op, {**item, "cost": _make(Cost, item.get("cost", {}))}))
        for item in data.get("tensors", []):
            graph.add_tensor(_make(Tensor, item))
        for item in data.get("clients", []):
            graph.add_client(_make(Client, item))
        graph.facts = _facts(data.get("facts", {}))
        graph.host_cores.update(data.get("host_cores", {}))
        graph.core_efficiency.update(data.get("core_efficiency", {}))
    except (TypeError, ValueError, AttributeError) as error:
        raise GraphError(f"not a graph description: {error}") from None
    check(graph)
    return graph


def _plain(item: Any) -> dict[str, Any]:
    return {
        f.name: _jsonable(getattr(item, f.name))
        for f in dataclasses.fields(item)
        if f.name != "cost"
    } | ({"cost": _plain(item.cost)} if isinstance(item, Op) else {})


def _facts(item: Any) -> GraphFacts:
    """The graph's facts from their table, a batch's own table within."""
    if not isinstance(item, dict):
        raise TypeError(f"GraphFacts: expected a table, got {type(item).__name__}")
    batch = item.get("batch")
    return _make(GraphFacts, {**item, "batch": None if batch is None else _make(BatchFacts, batch)})


def _jsonable(value: Any) -> Any:
    if isinstance(value, BatchFacts):
        return _plain(value)
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    return list(value) if isinstance(value, tuple) else value


def _make(cls: type[Any], item: dict[str, Any]) -> Any:
    """``cls(**item)`` with lists back to tuples and ``"inf"`` back to infinity in a number's
    field (an op may be named "inf"); unknown keys are an error. The constructor checks the
    values (:mod:`simsync.ir.limits`)."""
    if not isinstance(item, dict):
        raise TypeError(f"{cls.__name__}: expected a table, got {type(item).__name__}")
    numbers = {f.name for f in dataclasses.fields(cls) if str(f.type).startswith("float")}
    kwargs = {}
    for key, value in item.items():
        if key in numbers and value == "inf":
            value = float("inf")
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)
