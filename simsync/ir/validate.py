"""Check that a graph is well formed before anything runs it."""

from __future__ import annotations

from simsync.errors import GraphError
from simsync.ir.analysis import topological_order
from simsync.ir.graph import Graph
from simsync.ir.limits import check_host_tables
from simsync.ir.objects import Link

__all__ = ["validate"]


def validate(graph: Graph) -> None:
    """Raise :class:`GraphError` naming the first problem found, if any.

    Checks: the graph is acyclic (the cycle is named), every op's devices exist (a collective's
    ``device`` and its participants), every variable an op reads or writes exists, every
    resource an op acts on exists, every fetch names an op, every client's ``until`` names a
    variable, there is at least one client that is not a daemon and no two share a name, the
    graph's links are :class:`Link` objects, and its ``host_cores`` and ``core_efficiency`` hold
    allowed numbers. (Ops, tensors, devices, variables, resources, links and clients checked
    their own values when they were made, and are frozen.)

    The structure only: what an op's kind needs (its inputs, its resource) is checked by
    :func:`simsync.kinds.check_graph`, which calls this first.

    Examples
    --------
    >>> from simsync.ir.objects import Device, Op
    >>> g = Graph()
    >>> g.add_device(Device("/gpu:0"))
    >>> a, b = g.add_op(Op("a", "forward", "/gpu:0")), g.add_op(Op("b", "backward", "/gpu:1"))
    >>> validate(g)
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: op 'b' is placed on unknown device '/gpu:1'; devices: /gpu:0
    """
    for op in graph.ops():
        for device in dict.fromkeys((op.device, *op.devices)):
            if device not in graph.devices:
                known = ", ".join(graph.devices) or "(none)"
                raise GraphError(
                    f"op '{op.name}' is placed on unknown device '{device}'; devices: {known}"
                )
        for used in (*op.reads, *op.writes, *((op.gradient,) if op.gradient else ())):
            if used not in graph.variables:
                raise GraphError(f"op '{op.name}' uses unknown variable '{used}'")
        if op.resource is not None and op.resource not in graph.resources:
            raise GraphError(f"op '{op.name}' acts on unknown resource '{op.resource}'")
    for variable in graph.variables.values():
        if variable.device not in graph.devices:
            raise GraphError(
                f"variable '{variable.name}' lives on unknown device '{variable.device}'"
            )
    for resource in graph.resources.values():
        if resource.device not in graph.devices:
            raise GraphError(
                f"resource '{resource.name}' lives on unknown device '{resource.device}'"
            )
    topological_order(graph)  # names a cycle
    _check_graph_tables(graph)
    if not graph.clients:
        raise GraphError("the graph has no client: nothing would ever run it")
    if all(client.daemon for client in graph.clients):
        raise GraphError(
            "every client is a daemon (it loops until the others are done): nothing would "
            "ever end; make the training loop's client daemon=False"
        )
    names: set[str] = set()
    for client in graph.clients:
        if client.name in names:
            raise GraphError(f"client '{client.name}' is defined twice")
        names.add(client.name)
        for fetch in client.fetches:
            if fetch not in graph.nx:
                raise GraphError(f"client '{client.name}' fetches unknown op '{fetch}'")
        if client.until is not None and client.until not in graph.variables:
            raise GraphError(f"client '{client.name}' runs until unknown variable '{client.until}'")


def _check_graph_tables(graph: Graph) -> None:
    """What can change on a graph after it is built: its links and its tables per host."""
    for pair, link in (("", graph.link), *graph.links.items()):
        if not isinstance(link, Link):
            where = f" between '{pair[0]}' and '{pair[1]}'" if pair else ""
            raise GraphError(f"link{where}: {link!r} is not a Link")
    check_host_tables(graph.host_cores, graph.core_efficiency)
