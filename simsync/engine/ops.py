"""The pieces of a run in flight: the plan of a client's run, one ``sess.run``, one op
executing, one tensor travelling.

Ops and transfers are chains of SimPy callbacks (request -> grant -> timeout -> release), not
processes: the same behaviour with a third fewer events. The :class:`~simsync.engine.Engine`
owns the shared state (devices, ports, versions, resources, the trace); these classes only move
one op or one tensor along and call back into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import simpy

from simsync.engine.environment import EngineEnvironment
from simsync.engine.resources import Cores, Scheduled, Slot
from simsync.ir import Cost, Op
from simsync.kinds import OpKind

__all__ = ["EngineLike", "Execution", "Node", "Output", "Plan", "Run", "Transfer"]


class EngineLike(Protocol):
    """What an op or a tensor in flight calls back into: the engine
    (:class:`~simsync.engine.Engine`), which owns the shared state."""

    @property
    def env(self) -> EngineEnvironment: ...

    def resource_wait(self, run: Run, node: Node) -> simpy.Event: ...

    def served(self, run: Run, node: Node, value: Any) -> None: ...

    def record_reads(self, run: Run, op: Op, time: float) -> None: ...

    def finished(self, execution: Execution) -> None: ...

    def transferred(self, transfer: Transfer, end: float) -> None: ...


@dataclass(slots=True)
class Output:
    """A tensor leaving a node: where to, and what travelling costs."""

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
class Node:
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
    # read off the op and its kind once, for the hot path
    group: str | None = field(init=False)
    fraction: float = field(init=False)
    overhead: float = field(init=False)
    waits: bool = field(init=False)  # takes from a resource (a token, gradients) first
    puts: bool = field(init=False)  # pushes or enqueues when it ends
    dequeues: bool = field(init=False)  # its token becomes the worker's local step
    reads: bool = field(init=False)
    writes: bool = field(init=False)

    def __post_init__(self) -> None:
        cost, action = self.op.cost, self.kind.action
        self.group, self.fraction, self.overhead = cost.group, cost.fraction, cost.overhead
        self.waits = action in ("dequeue", "take")
        self.puts = action in ("push", "enqueue")
        self.dequeues = action == "dequeue"
        self.reads, self.writes = bool(self.op.reads), bool(self.op.writes)

    def duration(self, draws: dict[str, float]) -> float:
        """Seconds the node holds its device(s) in a run with these compute draws: its share of
        the step's draw, or its fixed cost."""
        group = self.group
        base = draws[group] * self.fraction if group is not None else self.fixed
        return base / self.speed + self.overhead + self.ring


@dataclass(slots=True)
class Plan:
    client: int
    name: str
    steps: int
    overhead: float
    nodes: list[Node]
    roots: list[int]
    groups: dict[str, Cost]
    bound: int | None = None
    shared: bool = False
    until: str | None = None
    daemon: bool = False
    #: per node, how many inputs it waits for
    pending: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.pending = [len(node.inputs) for node in self.nodes]


class Run:
    """The state of one ``sess.run`` in flight."""

    __slots__ = (
        "arrivals",
        "done",
        "draws",
        "pending",
        "plan",
        "read_versions",
        "remaining",
        "step",
        "token",
    )

    def __init__(
        self,
        env: simpy.Environment,
        plan: Plan,
        step: int,
        draws: dict[str, float],
        detail: bool = True,
    ) -> None:
        self.plan, self.step, self.draws = plan, step, draws
        self.pending = plan.pending.copy()
        #: per node, when each input arrived (kept with detail only)
        self.arrivals: list[list[tuple[str, float]]] = [[] for _ in plan.nodes] if detail else []
        self.remaining = len(plan.nodes)
        self.read_versions: dict[str, int] = {}
        self.token = 0  # the token its dequeue took, if any
        self.done = env.event()


class Execution:
    """One op running: wait for its resource, take its devices one by one, then a core, run,
    release, hand on."""

    __slots__ = (
        "blocked",
        "core",
        "duration",
        "engine",
        "held",
        "node",
        "ready",
        "run",
        "start",
    )

    def __init__(self, engine: EngineLike, run: Run, node: Node) -> None:
        self.engine, self.run, self.node = engine, run, node
        self.ready = self.start = engine.env.now
        self.blocked = 0.0
        self.held = 0  # devices (and locks) granted so far
        self.core = False
        self.duration = node.duration(run.draws)
        if node.waits:  # blocked on a resource, holding no device
            engine.resource_wait(run, node).callbacks.append(self._served)
        else:
            self._acquire(None)

    def _served(self, event: simpy.Event) -> None:
        self.blocked = self.engine.env.now - self.ready
        self.engine.served(self.run, self.node, event.value)
        self._acquire(None)

    def _acquire(self, _event: simpy.Event | None) -> None:
        devices, held, pool = self.node.devices, self.held, self.node.pool
        cores = pool is not None and self.duration > 0
        if held < len(devices):
            self.held = held + 1
            # once the last device is granted, begin at once unless a core is needed too
            last = self.held == len(devices) and not cores
            devices[held].request(self._begin if last else self._acquire)
        elif pool is not None and cores:
            self.core = True
            if pool.claim(self.run, self.node.index):  # kept by the op before
                self._begin(None)
            else:
                pool.request(self._begin, first=bool(self.node.inputs))
        else:
            self._begin(None)

    def _begin(self, _event: simpy.Event | None) -> None:
        engine, node = self.engine, self.node
        self.start = engine.env.now
        if node.reads:  # a read sees the variables as they are when it starts
            engine.record_reads(self.run, node.op, self.start)
        if self.core and node.pool is not None:  # busy cores slow each other
            node.pool.run(self.duration, self._finish)
        elif self.duration > 0:
            Scheduled(engine.env, self._finish, self.duration)
        else:
            self._finish(None)

    def _finish(self, _event: simpy.Event | None) -> None:
        node, run = self.node, self.run
        for device in node.devices:
            device.release()
        cores = node.pool if self.core else None
        successor = self._successor() if cores is not None else None
        if cores is not None and successor is not None:  # the run's next op goes on here
            cores.keep(run, successor)
        self.engine.finished(self)
        if cores is not None and successor is None:
            # after the outputs went on: a consumer that asked for a core meanwhile goes first
            cores.release()

    def _successor(self) -> int | None:
        """The op of this run to keep the core for: the first consumer on the same cores that
        this op makes ready (its last missing input), with no lock or resource to wait for and
        no device busy now (a core held meanwhile could deadlock)."""
        run, pool = self.run, self.node.pool
        for output in self.node.outputs:
            after = run.plan.nodes[output.dst]
            if (
                run.pending[output.dst] == 1
                and after.pool is pool
                and not after.op.locks
                and not after.waits
                and all(slot.count == 0 for slot in after.devices)
                and after.duration(run.draws) > 0
            ):
                return output.dst
        return None


class Transfer:
    """One tensor travelling: out-port, then in-port, hold both, release, then the latency."""

    __slots__ = ("engine", "node", "output", "run", "start")

    def __init__(self, engine: EngineLike, run: Run, node: Node, output: Output) -> None:
        self.engine, self.run, self.node, self.output = engine, run, node, output
        self.start = engine.env.now
        if output.seconds > 0 and output.out_port is not None:
            output.out_port.request(self._got_out_port)
        else:
            self._sent(None)

    def _got_out_port(self, _event: simpy.Event) -> None:
        assert self.output.in_port is not None
        self.output.in_port.request(self._got_in_port)

    def _got_in_port(self, _event: simpy.Event) -> None:
        self.start = self.engine.env.now
        Scheduled(self.engine.env, self._release, self.output.seconds)

    def _release(self, event: simpy.Event) -> None:
        output = self.output
        assert output.in_port is not None and output.out_port is not None
        output.in_port.release()
        output.out_port.release()
        self._sent(event)

    def _sent(self, _event: simpy.Event | None) -> None:
        end = self.engine.env.now
        if self.output.seconds <= 0:
            self.start = end
        if self.output.latency > 0:
            Scheduled(
                self.engine.env, lambda _e: self.engine.transferred(self, end), self.output.latency
            )
        else:
            self.engine.transferred(self, end)
