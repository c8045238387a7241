"""The dataflow graph: ops placed on devices, tensors between them, and client loops.

The objects it holds (:class:`Op`, :class:`Tensor`, :class:`Device`, :class:`Link`,
:class:`Variable`, :class:`Resource`, :class:`Client`) are defined in :mod:`simsync.ir.objects`
and importable from here too. The graph is a :class:`networkx.MultiDiGraph` underneath
(``Graph.nx``): nodes are op names with the :class:`Op` under ``"op"``, edges carry the
:class:`Tensor` under ``"tensor"``; two ops may share several tensors (a data edge and a
control edge). Devices live on hosts; a transfer between two hosts crosses the link of that
pair (:meth:`Graph.link_between`).

Build the graph's structure through :meth:`Graph.add_op` and :meth:`Graph.add_tensor`, never by
changing ``Graph.nx`` directly: analyses of the structure alone (a topological order, each
client's run order) are computed once and kept until one of these methods changes it
(:meth:`Graph.memo`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

import networkx as nx

from simsync.errors import GraphError
from simsync.ir.objects import Client, Cost, Device, Link, Op, Resource, Tensor, Variable

__all__ = [
    "Client",
    "Cost",
    "Device",
    "Graph",
    "Link",
    "Op",
    "Resource",
    "Tensor",
    "Variable",
    "natural_key",
]

T = TypeVar("T")


class Graph:
    """A dataflow graph with its devices, variables and clients.

    Examples
    --------
    >>> g = Graph(name="tiny")
    >>> g.add_device(Device("/gpu:0"))
    >>> g.add_op(Op("forward", "forward", "/gpu:0", Cost(0.002)))
    >>> g.add_op(Op("backward", "backward", "/gpu:0", Cost(0.004)))
    >>> g.add_tensor(Tensor("forward", "backward", nbytes=1024))
    >>> g.add_client(Client("main", fetches=("backward",)))
    >>> [op.name for op in g.ops()], g.tensor("forward", "backward").nbytes
    (['forward', 'backward'], 1024)
    """

    def __init__(self, name: str = "graph", link: Link | None = None) -> None:
        self.name = name
        #: the link between devices unless :attr:`links` names their pair of hosts
        self.link = link or Link()
        #: per pair of hosts (sorted), the link between them
        self.links: dict[tuple[str, str], Link] = {}
        self.nx: nx.MultiDiGraph = nx.MultiDiGraph()
        self.devices: dict[str, Device] = {}
        self.variables: dict[str, Variable] = {}
        self.resources: dict[str, Resource] = {}
        #: what the pattern that built the graph says of it (mode, aggregation, ...), to report
        self.facts: dict[str, Any] = {}
        self.clients: list[Client] = []
        self.host_cores: dict[str, int] = {}
        #: per host: each core's speed when all its cores are busy, relative to one busy core
        self.core_efficiency: dict[str, float] = {}
        #: analyses of the ops and tensors alone, kept until they change (see :meth:`memo`)
        self._memo: dict[Hashable, Any] = {}
        #: the client list last seen by add_client, and the names in it
        self._client_names: tuple[list[Client], set[str]] = (self.clients, set())

    # -- building -----------------------------------------------------------------------
    # Every name is registered once: a second object of the same name is a GraphError, never
    # a silent replacement of the first.
    def add_device(self, device: Device) -> None:
        """Add ``device``: a :class:`GraphError` if a device of its name is there already."""
        _register(self.devices, device.name, device, "device")

    def add_variable(self, variable: Variable) -> None:
        """Add ``variable``: a :class:`GraphError` if one of its name is there already."""
        _register(self.variables, variable.name, variable, "variable")

    def add_resource(self, resource: Resource) -> None:
        """Add ``resource``: a :class:`GraphError` if one of its name is there already."""
        _register(self.resources, resource.name, resource, "resource")

    def set_link(self, host_a: str, host_b: str, link: Link) -> None:
        """Set the link between two hosts (either order): a :class:`GraphError` if the pair
        has one already."""
        if not isinstance(link, Link):
            raise GraphError(f"link between '{host_a}' and '{host_b}': {link!r} is not a Link")
        pair = _pair(host_a, host_b)
        if pair in self.links:
            raise GraphError(f"link between '{pair[0]}' and '{pair[1]}' is defined twice")
        self.links[pair] = link

    def link_between(self, device_a: str, device_b: str) -> Link:
        """The link a transfer between two devices crosses.

        >>> g = Graph(link=Link(1e9))
        >>> g.add_device(Device("/job:ps/task:0", host="ps"))
        >>> g.add_device(Device("/job:worker/task:0", host="w0"))
        >>> g.set_link("w0", "ps", Link(1e6, latency=0.001))
        >>> g.link_between("/job:ps/task:0", "/job:worker/task:0").latency
        0.001
        """
        a, b = self.device(device_a).host, self.device(device_b).host
        return self.links.get(_pair(a, b), self.link)

    def device(self, name: str) -> Device:
        try:
            return self.devices[name]
        except KeyError:
            raise GraphError(f"no device named '{name}'") from None

    def add_op(self, op: Op) -> None:
        """Add ``op``: a :class:`GraphError` if an op of its name is there already."""
        if op.name in self.nx:
            raise GraphError(f"op '{op.name}' is defined twice")
        self.nx.add_node(op.name, op=op)
        self._memo.clear()

    def add_tensor(self, tensor: Tensor) -> None:
        """Add an edge between two ops already added: a pair of ops shares at most one data
        tensor and one control edge (a :class:`GraphError` otherwise)."""
        for end in (tensor.src, tensor.dst):
            if end not in self.nx:
                raise GraphError(
                    f"tensor {tensor.src} -> {tensor.dst}: dangling input, no op named '{end}'"
                )
        if any(t.control == tensor.control for t in self.tensors(tensor.src, tensor.dst)):
            edge = "control edge" if tensor.control else "data tensor"
            raise GraphError(f"{edge} {tensor.src} -> {tensor.dst} is defined twice")
        self.nx.add_edge(tensor.src, tensor.dst, tensor=tensor)
        self._memo.clear()

    def add_client(self, client: Client) -> None:
        """Add ``client``: a :class:`GraphError` if a client of its name is there already."""
        # ``clients`` is a plain list that may be replaced or changed: the names are read again
        # when it was replaced, a hit is confirmed, and validate() checks the list itself
        if self._client_names[0] is not self.clients:
            self._client_names = (self.clients, {c.name for c in self.clients})
        names = self._client_names[1]
        if client.name in names and any(c.name == client.name for c in self.clients):
            raise GraphError(f"client '{client.name}' is defined twice")
        self.clients.append(client)
        names.add(client.name)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per ``key`` and kept until an op or a tensor is added.

        For analyses that depend on the ops and tensors alone (a topological order, a run
        order): a simulation asks for them many times (the engine, the replay, the summary).
        Keep the result immutable (a tuple), or copy it before handing it out.

        >>> g = Graph()
        >>> g.add_device(Device("/gpu:0"))
        >>> g.add_op(Op("a", "forward", "/gpu:0"))
        >>> g.memo("size", lambda: len(g)), g.memo("size", lambda: -1)
        (1, 1)
        >>> g.add_op(Op("b", "forward", "/gpu:0"))
        >>> g.memo("size", lambda: len(g))
        2
        """
        try:
            value: T = self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
        return value

    # -- reading ------------------------------------------------------------------------
    def op(self, name: str) -> Op:
        try:
            op: Op = self.nx.nodes[name]["op"]
        except KeyError:
            raise GraphError(f"no op named '{name}'") from None
        return op

    def ops(self) -> Iterator[Op]:
        """Ops in insertion order."""
        for _, data in self.nx.nodes(data="op"):
            yield data

    def tensors(self, src: str, dst: str) -> list[Tensor]:
        """Every tensor from ``src`` to ``dst`` (data and control), in the order added."""
        if not self.nx.has_edge(src, dst):
            return []
        return [data["tensor"] for data in self.nx.get_edge_data(src, dst).values()]

    def tensor(self, src: str, dst: str) -> Tensor:
        """The tensor from ``src`` to ``dst``: the data one when there are several.

        >>> g = Graph()
        >>> g.add_device(Device("/gpu:0"))
        >>> g.add_op(Op("a", "forward", "/gpu:0")); g.add_op(Op("b", "backward", "/gpu:0"))
        >>> g.add_tensor(Tensor("a", "b", nbytes=8)); g.add_tensor(Tensor("a", "b", control=True))
        >>> len(g.tensors("a", "b")), g.tensor("a", "b").nbytes
        (2, 8)
        >>> g.tensor("b", "a")
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: no tensor from 'b' to 'a'
        """
        found = self.tensors(src, dst)
        if not found:
            raise GraphError(f"no tensor from '{src}' to '{dst}'")
        return next((t for t in found if not t.control), found[0])

    def edges(self) -> Iterator[Tensor]:
        """Every tensor of the graph (data and control), in the order added per op."""
        for _, _, data in self.nx.edges(data="tensor"):
            yield data

    def inputs(self, name: str) -> list[Tensor]:
        """The tensors into ``name``, in the order added (control edges included)."""
        self.op(name)
        return [data for _, _, data in self.nx.in_edges(name, data="tensor")]

    def outputs(self, name: str) -> list[Tensor]:
        """The tensors out of ``name``, in the order added (control edges included)."""
        self.op(name)
        return [data for _, _, data in self.nx.out_edges(name, data="tensor")]

    def variable(self, name: str) -> Variable:
        try:
            return self.variables[name]
        except KeyError:
            raise GraphError(f"no variable named '{name}'") from None

    def resource(self, name: str) -> Resource:
        try:
            return self.resources[name]
        except KeyError:
            raise GraphError(f"no resource named '{name}'") from None

    @property
    def towers(self) -> list[int]:
        """The tower indices present, sorted."""
        return sorted({op.tower for op in self.ops() if op.tower is not None})

    def __len__(self) -> int:
        return int(self.nx.number_of_nodes())

    def __repr__(self) -> str:
        return (
            f"Graph({self.name!r}, ops={len(self)}, tensors={self.nx.number_of_edges()}, "
            f"devices={len(self.devices)}, clients={len(self.clients)})"
        )


def _register(registry: dict[str, T], name: str, item: T, what: str) -> None:
    if name in registry:
        raise GraphError(f"{what} '{name}' is defined twice")
    registry[name] = item


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def natural_key(name: str) -> list[Any]:
    """Sort key for op, tower and device names: numbers in numeric order.

    >>> sorted(["tower_10/c", "tower_2/c"], key=natural_key)
    ['tower_2/c', 'tower_10/c']
    """
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
