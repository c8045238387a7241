"""The pieces of a run in flight: the plan of a client's run, one ``sess.run``, one op
executing, one tensor travelling.

Ops and transfers are chains of SimPy callbacks (request -> grant -> timeout -> release), not
processes: the same behaviour with a third fewer events. The :class:`~simsync.engine.Engine`
owns the shared state (devices, ports, versions, resources, the trace); these classes only move
one op or one tensor along and call back into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from simsync.engine.resources import Cores, Slot
from simsync.ir import Cost, Op
from simsync.kinds import OpKind

if TYPE_CHECKING:
    from simsync.engine.executor import Engine

__all__ = ["Execution", "Node", "Output", "Plan", "Run", "Transfer"]


@dataclass
class Output:
    """A tensor leaving a node: where to, and what travelling costs."""

    dst: int
    nbytes: int = 0
    seconds: float = 0.0  # holding the ports
    latency: float = 0.0
    out_port: Slot | None = None
    in_port: Slot | None = None

    @property
    def free(self) -> bool:
        return self.seconds <= 0 and self.latency <= 0


@dataclass
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


@dataclass
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


class Run:
    """The state of one ``sess.run`` in flight."""

    __slots__ = (
        "arrivals",
        "done",
        "draws",
        "handoffs",
        "pending",
        "plan",
        "read_versions",
        "remaining",
        "step",
        "token",
    )

    def __init__(
        self, env: simpy.Environment, plan: Plan, step: int, draws: dict[str, float]
    ) -> None:
        self.plan, self.step, self.draws = plan, step, draws
        self.pending = [len(n.inputs) for n in plan.nodes]
        self.arrivals: list[list[tuple[str, float]]] = [[] for _ in plan.nodes]
        self.remaining = len(plan.nodes)
        self.read_versions: dict[str, int] = {}
        self.token = 0  # the token its dequeue took, if any
        #: the nodes a finished op kept its core for (TensorFlow runs the next op of a run on
        #: the thread that finished the one before)
        self.handoffs: set[int] = set()
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

    def __init__(self, engine: Engine, run: Run, node: Node) -> None:
        self.engine, self.run, self.node = engine, run, node
        self.ready = self.start = engine.env.now
        self.blocked = 0.0
        self.held = 0  # devices (and locks) granted so far
        self.core = False
        self.duration = engine.duration(run, node)
        wait = engine.resource_wait(run, node)
        if wait is None:
            self._acquire(None)
        else:  # blocked on a resource, holding no device
            wait.callbacks.append(self._served)

    def _served(self, event: simpy.Event) -> None:
        self.blocked = self.engine.env.now - self.ready
        self.engine.served(self.run, self.node, event.value)
        self._acquire(None)

    def _acquire(self, _event: simpy.Event | None) -> None:
        devices = self.node.devices
        if self.held < len(devices):
            self.held += 1
            devices[self.held - 1].request(self._acquire)
        elif self.node.pool is not None and self.duration > 0:
            self.core = True
            if self.node.pool.claim(self.run, self.node.index):  # kept by the op before
                self._begin(None)
            else:
                self.node.pool.request(self._begin, first=bool(self.node.inputs))
        else:
            self._begin(None)

    def _begin(self, _event: simpy.Event | None) -> None:
        engine = self.engine
        self.start = engine.env.now
        if self.node.op.reads:  # a read sees the variables as they are when it starts
            engine.record_reads(self.run, self.node.op, self.start)
        if self.core and self.node.pool is not None:  # busy cores slow each other
            self.node.pool.run(self.duration, self._finish)
        elif self.duration > 0:
            engine.env.timeout(self.duration).callbacks.append(self._finish)
        else:
            self._finish(None)

    def _finish(self, _event: simpy.Event | None) -> None:
        node, run = self.node, self.run
        for device in node.devices:
            device.release()
        kept = False
        if self.core and node.pool is not None:
            successor = self._successor()
            if successor is not None:  # the run's next op goes on on this core
                node.pool.keep(run, successor)
                kept = True
        self.engine.finished(self)
        if self.core and node.pool is not None and not kept:
            # after the outputs went on: a consumer that asked for a core meanwhile goes first
            node.pool.release()

    def _successor(self) -> int | None:
        """The op of this run to keep the core for: the first consumer on the same cores that
        this op makes ready (its last missing input), with no lock or resource to wait for and
        no device busy now (a core held meanwhile could deadlock)."""
        run, engine, pool = self.run, self.engine, self.node.pool
        for output in self.node.outputs:
            after = run.plan.nodes[output.dst]
            if (
                run.pending[output.dst] == 1
                and after.pool is pool
                and not after.op.locks
                and after.kind.action in (None, "push", "enqueue")
                and all(slot.count == 0 for slot in after.devices)
                and output.dst not in run.handoffs
                and engine.duration(run, after) > 0
            ):
                return output.dst
        return None


class Transfer:
    """One tensor travelling: out-port, then in-port, hold both, release, then the latency."""

    __slots__ = ("engine", "node", "output", "run", "start")

    def __init__(self, engine: Engine, run: Run, node: Node, output: Output) -> None:
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
        self.engine.env.timeout(self.output.seconds).callbacks.append(self._release)

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
            timeout = self.engine.env.timeout(self.output.latency)
            timeout.callbacks.append(lambda _e: self.engine.transferred(self, end))
        else:
            self.engine.transferred(self, end)
