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

import itertools
import re
from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

import networkx as nx

from simsync.errors import GraphError
from simsync.ir.objects import (
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
Named = TypeVar("Named", Device, Variable, Resource)


class Graph:
    """A dataflow graph with its devices, variables, resources and clients.

    Build it in the order TensorFlow would: devices first, then ops placed on them, the
    tensors between the ops, and the clients that run them. Nothing runs while you build it.

    Parameters
    ----------
    name : str
        What views and summaries call the graph.
    link : Link, optional
        The link between any two devices whose pair of hosts has no link of its own
        (:meth:`set_link`); by default an infinitely fast one.

    Attributes
    ----------
    devices, variables, resources : dict
        By name, what :meth:`add_device`, :meth:`add_variable` and :meth:`add_resource` added.
    clients : list of Client
        What :meth:`add_client` added, in order (a plain list: you may replace it).
    facts : GraphFacts
        What the graph's maker says of it (mode, aggregation, an imported program's batch),
        to report; frozen: replace it (``dataclasses.replace``).
    host_cores, core_efficiency : dict
        Per host, the cores its logical devices share and how busy cores slow each other.
    nx : networkx.MultiDiGraph
        The structure underneath: read it, but build through the methods.

    Examples
    --------
    >>> g = Graph(name="tiny")
    >>> g.add_device(Device("/gpu:0"))
    >>> forward = g.add_op(Op("forward", "forward", "/gpu:0", Cost(0.002)))
    >>> backward = g.add_op(Op("backward", "backward", "/gpu:0", Cost(0.004)))
    >>> g.connect(forward, backward, nbytes=1024)
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
        #: what the graph's maker says of it (mode, aggregation, ...), replaced, never changed
        self.facts: GraphFacts = GraphFacts()
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
        """Add a device that ops, variables and resources can be placed on.

        Parameters
        ----------
        device : Device
            Its name is what ops name in ``device`` (``"/gpu:0"``).

        Raises
        ------
        GraphError
            If ``device`` is not a :class:`Device`, or a device of its name is there already.

        Examples
        --------
        >>> g = Graph()
        >>> g.add_device(Device("/gpu:0", speed=0.5))
        >>> g.device("/gpu:0").speed
        0.5
        """
        _register(self.devices, device, Device, "device")

    def add_variable(self, variable: Variable) -> None:
        """Add a variable: state on a device that ops read (``reads``) and write (``writes``).

        Parameters
        ----------
        variable : Variable
            Its ``device`` must be added before the graph is simulated (:func:`validate`).

        Raises
        ------
        GraphError
            If ``variable`` is not a :class:`Variable`, or one of its name is there already.

        Examples
        --------
        >>> g = Graph()
        >>> g.add_variable(Variable("weights", "/cpu:0", shape=(4, 2), nbytes=32))
        >>> g.variable("weights").shape
        (4, 2)
        """
        _register(self.variables, variable, Variable, "variable")

    def add_resource(self, resource: Resource) -> None:
        """Add a resource: a queue of tokens or a gradient accumulator that ops act on.

        Parameters
        ----------
        resource : Resource
            Ops name it in ``resource``.

        Raises
        ------
        GraphError
            If ``resource`` is not a :class:`Resource`, or one of its name is there already.

        Examples
        --------
        >>> g = Graph()
        >>> g.add_resource(Resource("sync_token_q", "queue", "/cpu:0"))
        >>> g.resource("sync_token_q").kind
        'queue'
        """
        _register(self.resources, resource, Resource, "resource")
        self._memo.clear()  # who puts into and gets from which resource

    def set_link(self, host_a: str, host_b: str, link: Link) -> None:
        """Set the link between two hosts, in either order.

        Parameters
        ----------
        host_a, host_b : str
            The hosts, as devices name them in ``host``.
        link : Link
            What a transfer between a device of one and a device of the other crosses.

        Raises
        ------
        GraphError
            If ``link`` is not a :class:`Link`, or the pair has a link already.

        Examples
        --------
        See :meth:`link_between`.
        """
        if not isinstance(link, Link):
            raise GraphError(f"link between '{host_a}' and '{host_b}': {link!r} is not a Link")
        pair = _pair(host_a, host_b)
        if pair in self.links:
            raise GraphError(f"link between '{pair[0]}' and '{pair[1]}' is defined twice")
        self.links[pair] = link

    def link_between(self, device_a: str, device_b: str) -> Link:
        """The link a transfer between two devices crosses.

        Parameters
        ----------
        device_a, device_b : str
            Names of devices in the graph, in either order.

        Returns
        -------
        Link
            The link of their pair of hosts (:meth:`set_link`), else the graph's ``link``.

        Raises
        ------
        GraphError
            If either device is not in the graph.

        Examples
        --------
        >>> g = Graph(link=Link(1e9))
        >>> g.add_device(Device("/job:ps/task:0", host="ps"))
        >>> g.add_device(Device("/job:worker/task:0", host="w0"))
        >>> g.set_link("w0", "ps", Link(1e6, latency=0.001))
        >>> g.link_between("/job:ps/task:0", "/job:worker/task:0").latency
        0.001
        """
        a, b = self.device(device_a).host, self.device(device_b).host
        return self.links.get(_pair(a, b), self.link)

    def add_op(self, op: Op) -> Op:
        """Add an op, and return it (keep it to :meth:`connect` it).

        Parameters
        ----------
        op : Op
            Its device need not be added yet: :func:`validate` checks the whole graph.

        Returns
        -------
        Op
            ``op`` itself.

        Raises
        ------
        GraphError
            If ``op`` is not an :class:`Op`, or an op of its name is there already.

        Examples
        --------
        >>> g = Graph()
        >>> loss = g.add_op(Op("tower_0/loss", "forward", "/gpu:0", Cost(0.004), tower=0))
        >>> loss.name, g.op("tower_0/loss") is loss
        ('tower_0/loss', True)
        >>> g.add_op(Op("tower_0/loss", "backward", "/gpu:0"))
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: op 'tower_0/loss' is defined twice
        """
        _check_type(op, Op, "op")
        if op.name in self.nx:
            raise GraphError(f"op '{op.name}' is defined twice")
        self.nx.add_node(op.name, op=op)
        self._memo.clear()
        return op

    def replace_op(self, op: Op) -> None:
        """Put ``op`` in place of the op of its name; the tensors in and out of it stay.

        Parameters
        ----------
        op : Op
            The new op; an op of its name must be there.

        Raises
        ------
        GraphError
            If ``op`` is not an :class:`Op`, or no op of its name is there.

        Examples
        --------
        >>> g = Graph()
        >>> _ = g.add_op(Op("a", "forward", "/gpu:0", Cost(0.004)))
        >>> g.replace_op(Op("a", "forward", "/gpu:0", Cost(0.002))); g.op("a").cost.mean
        0.002
        >>> g.replace_op(Op("b", "forward", "/gpu:0"))
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: no op named 'b'
        """
        _check_type(op, Op, "op")
        if op.name not in self.nx:
            raise GraphError(f"no op named '{op.name}'")
        self.nx.nodes[op.name]["op"] = op
        self._memo.clear()

    def add_tensor(self, tensor: Tensor) -> None:
        """Add an edge between two ops already added.

        A pair of ops shares at most one data tensor and one control edge. To add a chain of
        tensors at once, use :meth:`connect`.

        Parameters
        ----------
        tensor : Tensor
            From ``tensor.src`` to ``tensor.dst``: the destination cannot start before the
            source ends (and, across devices, before the bytes have crossed the link).

        Raises
        ------
        GraphError
            If ``tensor`` is not a :class:`Tensor`, either end is not an op of the graph, or
            the pair has a tensor of its sort (data or control) already.

        Examples
        --------
        >>> g = Graph()
        >>> for name in ("a", "b"):
        ...     _ = g.add_op(Op(name, "forward", "/gpu:0"))
        >>> g.add_tensor(Tensor("a", "b", nbytes=8))
        >>> g.add_tensor(Tensor("a", "c"))
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: tensor a -> c: dangling input, no op named 'c'
        """
        _check_type(tensor, Tensor, "tensor")
        self._check_new_tensor(tensor)
        self.nx.add_edge(tensor.src, tensor.dst, tensor=tensor)
        self._memo.clear()

    def connect(self, *ops: str | Op, nbytes: int = 0, control: bool = False) -> None:
        """Add a chain of tensors: from the first op to the second, the second to the third...

        ``g.connect("a", "b", "c")`` is ``g.add_tensor(Tensor("a", "b"))`` then
        ``g.add_tensor(Tensor("b", "c"))``; every tensor carries ``nbytes``. Nothing is added
        unless every tensor of the chain can be.

        Parameters
        ----------
        *ops : str or Op
            Two or more ops of the graph, by name or as :meth:`add_op` returned them.
        nbytes : int, optional
            The bytes each tensor carries (a transfer when it crosses devices); default 0.
        control : bool, optional
            Add control edges, which only order, instead of data tensors.

        Raises
        ------
        GraphError
            If fewer than two ops are given, one is not in the graph, or a pair of the chain
            has a tensor of its sort already (or appears twice in it).

        Examples
        --------
        >>> g = Graph()
        >>> read, loss, grads = (g.add_op(Op(name, kind, "/gpu:0")) for name, kind in
        ...     [("read", "read"), ("loss", "forward"), ("grads", "backward")])
        >>> g.connect(read, loss, grads, nbytes=256)
        >>> [(t.src, t.dst, t.nbytes) for t in g.edges()]
        [('read', 'loss', 256), ('loss', 'grads', 256)]
        >>> g.connect("grads", "apply")
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: tensor grads -> apply: dangling input, no op named 'apply'
        """
        names = [op.name if isinstance(op, Op) else op for op in ops]
        if len(names) < 2:
            raise GraphError(f"connect needs two ops or more, got {len(names)}")
        chain = [
            Tensor(src, dst, nbytes=nbytes, control=control)
            for src, dst in itertools.pairwise(names)
        ]
        for i, tensor in enumerate(chain):
            self._check_new_tensor(tensor)
            if any((t.src, t.dst) == (tensor.src, tensor.dst) for t in chain[:i]):
                edge = "control edge" if control else "data tensor"
                raise GraphError(f"{edge} {tensor.src} -> {tensor.dst} is defined twice")
        for tensor in chain:
            self.nx.add_edge(tensor.src, tensor.dst, tensor=tensor)
        self._memo.clear()

    def _check_new_tensor(self, tensor: Tensor) -> None:
        """Raise unless ``tensor`` joins two ops of the graph that have no tensor of its sort."""
        for end in (tensor.src, tensor.dst):
            if end not in self.nx:
                raise GraphError(
                    f"tensor {tensor.src} -> {tensor.dst}: dangling input, no op named '{end}'"
                )
        if any(t.control == tensor.control for t in self.tensors(tensor.src, tensor.dst)):
            edge = "control edge" if tensor.control else "data tensor"
            raise GraphError(f"{edge} {tensor.src} -> {tensor.dst} is defined twice")

    def add_client(self, client: Client) -> None:
        """Add a client: a loop that runs ``sess.run(client.fetches)`` again and again.

        Parameters
        ----------
        client : Client
            Its fetches name ops; a run executes them and everything they depend on.

        Raises
        ------
        GraphError
            If ``client`` is not a :class:`Client`, or a client of its name is there already.

        Examples
        --------
        >>> g = Graph()
        >>> g.add_client(Client("main", fetches=("apply_gradients",)))
        >>> g.add_client(Client("main", fetches=("loss",)))
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: client 'main' is defined twice
        """
        _check_type(client, Client, "client")
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
        """``compute()``, computed once per ``key`` and kept until an op, a tensor or a resource
        is added.

        For analyses that depend on the ops and tensors alone (a topological order, a run
        order): a simulation asks for them many times (the engine, the replay, the summary).
        Keep the result immutable (a tuple), or copy it before handing it out.

        Parameters
        ----------
        key : hashable
            Names the analysis (and its arguments).
        compute : callable
            Called without arguments when ``key`` has no value kept.

        Returns
        -------
        object
            What ``compute()`` returned, now or before the graph last changed.

        Examples
        --------
        >>> g = Graph()
        >>> _ = g.add_op(Op("a", "forward", "/gpu:0"))
        >>> g.memo("size", lambda: len(g)), g.memo("size", lambda: -1)
        (1, 1)
        >>> _ = g.add_op(Op("b", "forward", "/gpu:0"))
        >>> g.memo("size", lambda: len(g))
        2
        """
        try:
            value: T = self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
        return value

    # -- reading ------------------------------------------------------------------------
    def device(self, name: str) -> Device:
        """The device called ``name``.

        Parameters
        ----------
        name : str
            A device's name (``"/gpu:0"``).

        Returns
        -------
        Device

        Raises
        ------
        GraphError
            If the graph has no device of that name.

        Examples
        --------
        >>> Graph().device("/gpu:7")
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: no device named '/gpu:7'
        """
        return _lookup(self.devices, name, "device")

    def op(self, name: str) -> Op:
        """The op called ``name``.

        Parameters
        ----------
        name : str
            An op's name (``"tower_0/loss"``).

        Returns
        -------
        Op

        Raises
        ------
        GraphError
            If the graph has no op of that name.

        Examples
        --------
        >>> g = Graph()
        >>> _ = g.add_op(Op("tower_0/loss", "forward", "/gpu:0", tower=0))
        >>> g.op("tower_0/loss").tower
        0
        >>> g.op("tower_2/loss")
        Traceback (most recent call last):
        ...
        simsync.errors.GraphError: no op named 'tower_2/loss'
        """
        try:
            op: Op = self.nx.nodes[name]["op"]
        except (KeyError, TypeError):  # TypeError: a name that cannot be a node (a list)
            raise GraphError(f"no op named '{name}'") from None
        return op

    def ops(self) -> Iterator[Op]:
        """Every op, in the order added.

        Returns
        -------
        iterator of Op

        Examples
        --------
        >>> g = Graph()
        >>> for name in ("b", "a"):
        ...     _ = g.add_op(Op(name, "forward", "/gpu:0"))
        >>> [op.name for op in g.ops()]
        ['b', 'a']
        """
        for _, data in self.nx.nodes(data="op"):
            yield data

    def tensors(self, src: str, dst: str) -> list[Tensor]:
        """Every tensor from ``src`` to ``dst`` (data and control), in the order added.

        Parameters
        ----------
        src, dst : str
            Names of ops.

        Returns
        -------
        list of Tensor
            Empty when there is none (or an op is not in the graph).

        Examples
        --------
        See :meth:`tensor`.
        """
        if not self.nx.has_edge(src, dst):
            return []
        return [data["tensor"] for data in self.nx.get_edge_data(src, dst).values()]

    def tensor(self, src: str, dst: str) -> Tensor:
        """The tensor from ``src`` to ``dst``: the data one when there are several.

        Parameters
        ----------
        src, dst : str
            Names of ops.

        Returns
        -------
        Tensor

        Raises
        ------
        GraphError
            If no tensor goes from ``src`` to ``dst``.

        Examples
        --------
        >>> g = Graph()
        >>> for name in ("a", "b"):
        ...     _ = g.add_op(Op(name, "forward", "/gpu:0"))
        >>> g.connect("a", "b", nbytes=8); g.connect("a", "b", control=True)
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
        """Every tensor of the graph (data and control), in the order added per op.

        Returns
        -------
        iterator of Tensor

        Examples
        --------
        See :meth:`connect`.
        """
        for _, _, data in self.nx.edges(data="tensor"):
            yield data

    def inputs(self, name: str) -> list[Tensor]:
        """The tensors into op ``name``, in the order added (control edges included).

        Parameters
        ----------
        name : str
            An op's name.

        Returns
        -------
        list of Tensor

        Raises
        ------
        GraphError
            If the graph has no op of that name.

        Examples
        --------
        >>> g = Graph()
        >>> for name in ("a", "b", "c"):
        ...     _ = g.add_op(Op(name, "forward", "/gpu:0"))
        >>> g.connect("a", "c"); g.connect("b", "c")
        >>> [t.src for t in g.inputs("c")], [t.dst for t in g.outputs("a")]
        (['a', 'b'], ['c'])
        """
        self.op(name)
        return [data for _, _, data in self.nx.in_edges(name, data="tensor")]

    def outputs(self, name: str) -> list[Tensor]:
        """The tensors out of op ``name``, in the order added (control edges included).

        Parameters
        ----------
        name : str
            An op's name.

        Returns
        -------
        list of Tensor

        Raises
        ------
        GraphError
            If the graph has no op of that name.

        Examples
        --------
        See :meth:`inputs`.
        """
        self.op(name)
        return [data for _, _, data in self.nx.out_edges(name, data="tensor")]

    def variable(self, name: str) -> Variable:
        """The variable called ``name``.

        Parameters
        ----------
        name : str
            A variable's name.

        Returns
        -------
        Variable

        Raises
        ------
        GraphError
            If the graph has no variable of that name.

        Examples
        --------
        See :meth:`add_variable`.
        """
        return _lookup(self.variables, name, "variable")

    def resource(self, name: str) -> Resource:
        """The resource called ``name``.

        Parameters
        ----------
        name : str
            A resource's name.

        Returns
        -------
        Resource

        Raises
        ------
        GraphError
            If the graph has no resource of that name.

        Examples
        --------
        See :meth:`add_resource`.
        """
        return _lookup(self.resources, name, "resource")

    @property
    def towers(self) -> list[int]:
        """The tower indices its ops carry, sorted (empty when no op belongs to a tower).

        Examples
        --------
        >>> g = Graph()
        >>> for tower in (1, 0, 1):
        ...     _ = g.add_op(Op(f"op_{len(g)}", "forward", "/gpu:0", tower=tower))
        >>> g.towers
        [0, 1]
        """
        return sorted({op.tower for op in self.ops() if op.tower is not None})

    def __len__(self) -> int:
        return int(self.nx.number_of_nodes())

    def __repr__(self) -> str:
        return (
            f"Graph({self.name!r}, ops={len(self)}, tensors={self.nx.number_of_edges()}, "
            f"devices={len(self.devices)}, clients={len(self.clients)})"
        )


def _check_type(item: object, expected: type, what: str) -> None:
    """A :class:`GraphError` unless ``item`` is an ``expected`` (``add_op("loss")``)."""
    if not isinstance(item, expected):
        name = expected.__name__
        article = "an" if name[0] in "AEIOU" else "a"
        raise GraphError(
            f"add_{what} takes {article} {name}, not {item!r}: make one with {name}(...)"
        )


def _register(registry: dict[str, Named], item: Named, expected: type[Named], what: str) -> None:
    _check_type(item, expected, what)
    if item.name in registry:
        raise GraphError(f"{what} '{item.name}' is defined twice")
    registry[item.name] = item


def _lookup(registry: dict[str, T], name: str, what: str) -> T:
    try:
        return registry[name]
    except (KeyError, TypeError):  # TypeError: a name that cannot be a key (a list)
        raise GraphError(f"no {what} named '{name}'") from None


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def natural_key(name: str) -> list[Any]:
    """Sort key for op, tower and device names: numbers in numeric order.

    >>> sorted(["tower_10/c", "tower_2/c"], key=natural_key)
    ['tower_2/c', 'tower_10/c']
    """
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
