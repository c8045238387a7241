"""The plan of a client's run: its ops in run order, each with what the hot path needs read off
it once (its places, its cost, its action on a resource, its inputs and outputs).

A client runs the same fetches again and again, so the engine plans each client once, before
the run: every op of its run becomes a :class:`PlannedOp` that knows, by index, which planned
ops feed it and which it feeds (:class:`Output`: and what the tensor's journey costs). Running
an op then looks nothing up by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simsync.engine.resources import Cores, Slot
from simsync.ir import (
    LOCALHOST,
    Client,
    Cost,
    Graph,
    Op,
    Tensor,
    communication_time,
    crosses_devices,
    op_speed,
    run_orders,
    tensor_link,
)
from simsync.ir.resources import Action
from simsync.kinds import OpKind, kind_of

__all__ = ["Output", "Places", "Plan", "PlannedOp", "plans"]


@dataclass(slots=True)
class Output:
    """A tensor leaving a planned op: to which (by index), and what travelling costs."""

    dst: int
    nbytes: int = 0
    seconds: float = 0.0  # holding the ports
    latency: float = 0.0
    out_port: Slot | None = None
    in_port: Slot | None = None
    #: nothing to hold and no latency: the tensor arrives as its op ends
    free: bool = field(init=False)

    def __post_init__(self) -> None:
        self.free = self.seconds <= 0 and self.latency <= 0


@dataclass(slots=True)
class PlannedOp:
    """One op of a client's run, with everything the hot path needs precomputed."""

    op: Op
    kind: OpKind
    index: int
    devices: list[Slot]  # locks, then devices, sorted: no deadlock
    pool: Cores | None  # the host's cores, when shared
    fixed: float  # seconds at speed 1, when the cost is not drawn
    speed: float
    ring: float  # all-reduce communication seconds
    inputs: list[int] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    #: puts into a queue with a capacity: waits for room first
    room: bool = False
    # read off the op and its kind once, for the hot path
    group: str | None = field(init=False)
    fraction: float = field(init=False)
    overhead: float = field(init=False)
    action: Action | None = field(init=False)
    waits: bool = field(init=False)  # gets from a resource (a token, gradients), or room, first
    puts: bool = field(init=False)  # puts into a resource when it ends
    sets_counter: bool = field(init=False)  # what it gets becomes the counter it writes
    reads: bool = field(init=False)
    writes: bool = field(init=False)
    #: writes variables, puts into a resource or sets a counter as it ends
    effects: bool = field(init=False)
    #: holds one device, waits for no resource and takes no core of a pool: the usual op
    single: bool = field(init=False)
    #: its duration when its cost is not drawn (None: drawn each step)
    seconds: float | None = field(init=False)
    #: what a record of its execution names: the op, its kind, its devices
    record: tuple[str, str, tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        op, cost, action = self.op, self.op.cost, self.kind.action
        self.group, self.fraction, self.overhead = cost.group, cost.fraction, cost.overhead
        self.action = action
        self.waits = action is not None and (not action.puts or self.room)
        self.puts = action is not None and action.puts
        self.sets_counter = action is not None and action.sets_counter
        self.reads, self.writes = bool(op.reads), bool(op.writes)
        self.effects = self.writes or self.puts or self.sets_counter
        self.single = len(self.devices) == 1 and not self.waits and self.pool is None
        self.seconds = None if self.group is not None else self.duration({})
        self.record = (op.name, op.kind, op.devices)

    def duration(self, draws: dict[str, float]) -> float:
        """Seconds the op holds its device(s) in a run with these compute draws: its share of
        the step's draw, or its fixed cost."""
        group = self.group
        base = draws[group] * self.fraction if group is not None else self.fixed
        return base / self.speed + self.overhead + self.ring


@dataclass(slots=True)
class Plan:
    """A client's run, planned: its ops in run order, the roots (no input), the cost groups
    drawn each step, and how the client loops."""

    client: int
    name: str
    steps: int
    overhead: float
    run_work: float
    ops: list[PlannedOp]
    roots: list[int]
    groups: dict[str, Cost]
    bound: int | None = None
    shared: bool = False
    until: str | None = None
    daemon: bool = False
    run_latency: float = 0.0
    #: per planned op, how many inputs it waits for
    pending: list[int] = field(init=False)
    #: whether any op takes a thread of a host's pool (only then are threads tracked)
    pooled: bool = field(init=False)

    def __post_init__(self) -> None:
        self.pending = [len(planned.inputs) for planned in self.ops]
        self.pooled = any(planned.pool is not None for planned in self.ops)


@dataclass(frozen=True)
class Places:
    """The engine's places, by name: what an op holds while it runs and a tensor while it
    travels."""

    devices: dict[str, Slot]
    out_ports: dict[str, Slot]
    in_ports: dict[str, Slot]
    locks: dict[str, Slot]
    cores: dict[str, Cores]  # by host


def plans(graph: Graph, steps: int, places: Places) -> list[Plan]:
    """One plan per client of ``graph``; a client without its own step count runs ``steps``."""
    orders = run_orders(graph, [c.fetches for c in graph.clients])
    return [
        _plan(graph, places, i, c, c.steps or steps, order)
        for i, (c, order) in enumerate(zip(graph.clients, orders, strict=True))
    ]


def _plan(
    graph: Graph, places: Places, index_of_client: int, client: Client, steps: int, order: list[str]
) -> Plan:
    index = {op_name: i for i, op_name in enumerate(order)}
    planned = [_planned(graph, places, graph.op(op_name), i) for i, op_name in enumerate(order)]
    groups: dict[str, Cost] = {}
    for one in planned:
        if one.op.cost.group is not None:
            groups[one.op.cost.group] = one.op.cost
        # Inputs in the order the graph declares them (tower order): sums are reproducible.
        one.inputs = [index[tensor.src] for tensor in graph.inputs(one.op.name)]
        one.outputs = [
            _output(graph, places, index[tensor.dst], tensor)
            for tensor in graph.outputs(one.op.name)
            if tensor.dst in index
        ]
    roots = [one.index for one in planned if not one.inputs]
    return Plan(
        index_of_client,
        client.name,
        steps,
        client.overhead,
        client.run_work,
        planned,
        roots,
        groups,
        client.staleness_bound,
        client.shared_steps,
        client.until,
        client.daemon,
        client.run_latency,
    )


def _runs_many(graph: Graph, name: str) -> bool:
    """Whether device ``name`` runs many ops at once: a concurrent one, or a logical device
    of the host whose cores the graph shares (its ops take the host's inter-op threads, as
    many at once as there are; nothing holds the device itself)."""
    device = graph.devices[name]
    return device.concurrent or (device.host == LOCALHOST and LOCALHOST in graph.host_cores)


def _planned(graph: Graph, places: Places, op: Op, index: int) -> PlannedOp:
    host = graph.devices[op.device].host
    resource = graph.resources.get(op.resource) if op.resource is not None else None
    return PlannedOp(
        op,
        kind_of(op.kind),
        index,
        devices=[places.locks[name] for name in sorted(op.locks)]
        + [places.devices[d] for d in sorted(op.devices) if not _runs_many(graph, d)],
        pool=places.cores.get(host),
        fixed=op.cost.mean * op.cost.fraction,
        speed=op_speed(graph, op),
        ring=communication_time(graph, op),
        room=resource is not None and resource.capacity > 0,
    )


def _output(graph: Graph, places: Places, dst: int, tensor: Tensor) -> Output:
    if not crosses_devices(graph, tensor):
        return Output(dst)
    link = tensor_link(graph, tensor)
    src, target = graph.op(tensor.src), graph.op(tensor.dst)
    return Output(
        dst,
        tensor.nbytes,
        link.transfer_time(tensor.nbytes),
        link.latency,
        places.out_ports[src.device],
        places.in_ports[target.device],
    )
