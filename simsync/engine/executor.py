"""The SimPy executor: TensorFlow's execution model as a discrete-event simulation.

Rules, as TensorFlow's executor follows them:

1. A client runs ``sess.run(fetches)``: the fetches and their ancestors execute; the call
   returns when all of them have finished. A client's runs are strictly one after another.
2. An op becomes *ready* when every input tensor has arrived; it then waits for its device (one
   op at a time per device) and, if the host's cores are shared, for a core.
3. It runs for its cost divided by its device's speed (collectives: at the slowest
   participant's speed, plus the ring all-reduce time).
4. A tensor to another device is a transfer: it holds the sender's out-port and the receiver's
   in-port for ``bytes / bandwidth``, then arrives one latency later.
5. ``read`` ops record the version of each variable they read; ``apply`` ops bump it.

Nothing else synchronizes: sync points, waiting and contention all follow from these rules.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from simsync.engine.draws import draw_step
from simsync.engine.environment import CountingEnvironment
from simsync.engine.kernels import Numerics
from simsync.errors import SimulationError
from simsync.ir import Cost, Graph, Op, crosses_devices, ring_allreduce_time, run_order, validate
from simsync.numerics import ModelSpec
from simsync.trace import OpRecord, StepRecord, Trace, TransferRecord, VariableAccess

__all__ = ["Engine"]

StepCallback = Callable[[StepRecord], None]


@dataclass
class _Node:
    """One op of a client's run, precomputed once."""

    op: Op
    index: int
    inputs: list[int] = field(default_factory=list)
    outputs: list[tuple[int, int, bool]] = field(default_factory=list)  # (dst, bytes, travels)
    fixed: float = 0.0        # seconds, when the cost is not drawn
    speed: float = 1.0
    ring: float = 0.0         # all-reduce communication seconds


@dataclass
class _Plan:
    client: int
    name: str
    steps: int
    nodes: list[_Node]
    roots: list[int]
    groups: dict[str, Cost]


class _Run:
    """The state of one ``sess.run`` in flight."""

    __slots__ = ("arrivals", "done", "draws", "losses", "pending", "plan", "remaining", "step",
                 "values")

    def __init__(self, env: simpy.Environment, plan: _Plan, step: int,
                 draws: dict[str, float]) -> None:
        self.plan, self.step, self.draws = plan, step, draws
        self.pending = [len(n.inputs) for n in plan.nodes]
        self.arrivals: list[list[tuple[str, float]]] = [[] for _ in plan.nodes]
        self.values: list[Any] = [None] * len(plan.nodes)
        self.remaining = len(plan.nodes)
        self.losses: list[float] = []
        self.done = env.event()


class Engine:
    """Run every client of ``graph`` for ``steps`` steps and return the :class:`Trace`.

    ``model`` turns on the numerics (real parameter values); ``on_step`` is called after each
    finished step (progress bars use it).

    >>> from simsync.patterns import tiny_example
    >>> trace = Engine(tiny_example(), steps=3).run()
    >>> [round(s.duration, 6) for s in trace.steps]
    [0.02, 0.02, 0.02]
    """

    def __init__(self, graph: Graph, *, steps: int, seed: int = 0,
                 model: ModelSpec | None = None, on_step: StepCallback | None = None) -> None:
        validate(graph)
        self.graph, self.seed, self.on_step = graph, seed, on_step
        self.env = CountingEnvironment()
        self.trace = Trace(source="simulator")
        self.devices = {d: simpy.Resource(self.env, 1) for d in graph.devices}
        self.out_ports = {d: simpy.Resource(self.env, 1) for d in graph.devices}
        self.in_ports = {d: simpy.Resource(self.env, 1) for d in graph.devices}
        self.cores = {h: simpy.Resource(self.env, n) for h, n in graph.host_cores.items()}
        self.versions = dict.fromkeys(graph.variables, 0)
        self.numerics = Numerics(graph, model, seed) if model is not None else None
        self.plans = [self._plan(i, c.name, c.fetches, c.steps or steps)
                      for i, c in enumerate(graph.clients)]

    # -- planning -------------------------------------------------------------------------
    def _plan(self, client: int, name: str, fetches: tuple[str, ...], steps: int) -> _Plan:
        graph = self.graph
        order = run_order(graph, fetches)
        index = {op_name: i for i, op_name in enumerate(order)}
        nodes = [self._node(graph.op(op_name), i) for i, op_name in enumerate(order)]
        groups: dict[str, Cost] = {}
        for node in nodes:
            if node.op.cost.group is not None:
                groups[node.op.cost.group] = node.op.cost
            # Inputs in the order the graph declares them (tower order): sums are reproducible.
            node.inputs = [index[tensor.src] for tensor in graph.inputs(node.op.name)]
            for tensor in graph.outputs(node.op.name):
                if tensor.dst in index:
                    travels = crosses_devices(graph, tensor)
                    node.outputs.append((index[tensor.dst], tensor.nbytes, travels))
        roots = [n.index for n in nodes if not n.inputs]
        return _Plan(client, name, steps, nodes, roots, groups)

    def _node(self, op: Op, index: int) -> _Node:
        speed = min(self.graph.devices[d].speed for d in op.devices)
        ring = 0.0
        if op.kind == "allreduce":
            ring = ring_allreduce_time(len(op.devices), op.nbytes, self.graph.link)
        return _Node(op, index, fixed=op.cost.mean * op.cost.fraction, speed=speed, ring=ring)

    # -- running --------------------------------------------------------------------------
    def run(self) -> Trace:
        """Simulate until every client has finished; raise if something can never run."""
        finished = [self.env.process(self._client(plan)) for plan in self.plans]
        self.env.run()
        stuck = [p.name for p, f in zip(self.plans, finished, strict=True) if not f.triggered]
        if stuck:
            raise SimulationError(
                f"deadlock: client(s) {', '.join(stuck)} wait for ops that can never run"
            )
        self.trace.events = self.env.events
        if self.numerics is not None:
            self.trace.params = self.numerics.params()
        return self.trace

    def _client(self, plan: _Plan) -> Generator[simpy.Event, Any, None]:
        env = self.env
        for step in range(plan.steps):
            draws = draw_step(self.seed, plan.client, step, plan.groups) if plan.groups else {}
            run = _Run(env, plan, step, draws)
            start = env.now
            for root in plan.roots:
                env.process(self._execute(run, plan.nodes[root]))
            yield run.done
            loss = sum(run.losses) / len(run.losses) if run.losses else None
            record = StepRecord(plan.name, step, start, env.now, loss)
            self.trace.steps.append(record)
            if self.on_step is not None:
                self.on_step(record)

    def _duration(self, run: _Run, node: _Node) -> float:
        cost = node.op.cost
        base = run.draws[cost.group] * cost.fraction if cost.group is not None else node.fixed
        return base / node.speed + node.ring

    def _execute(self, run: _Run, node: _Node) -> Generator[simpy.Event, Any, None]:
        env, op = self.env, node.op
        ready = env.now
        requests = [self.devices[d].request() for d in sorted(op.devices)]
        for request in requests:
            yield request
        duration = self._duration(run, node)
        core = None
        pool = self.cores.get(self.graph.devices[op.device].host)
        if pool is not None and duration > 0:
            core = pool.request()
            yield core
        start = env.now
        self._record_reads(run, op, start)
        if duration > 0:
            yield env.timeout(duration)
        if core is not None:
            pool.release(core)  # type: ignore[union-attr]
        for d, request in zip(sorted(op.devices), requests, strict=True):
            self.devices[d].release(request)
        value = self._compute(run, node)
        self._record_writes(run, op, env.now)
        loss = value[0] if op.kind == "forward" and value is not None else None
        if loss is not None:
            run.losses.append(loss)
        self.trace.ops.append(OpRecord(
            op.name, op.kind, op.devices, run.plan.name, run.step, ready, start, env.now,
            tuple(run.arrivals[node.index]), loss))
        self._complete(run, node, value)

    def _compute(self, run: _Run, node: _Node) -> Any:
        if self.numerics is None:
            return None
        nodes = run.plan.nodes
        inputs = [(nodes[i].op, run.values[i]) for i in node.inputs]
        return self.numerics.compute(node.op, inputs, run.plan.client, run.step)

    def _record_reads(self, run: _Run, op: Op, time: float) -> None:
        for variable in op.reads:
            self.trace.accesses.append(VariableAccess(
                variable, op.name, run.plan.name, run.step, time, self.versions[variable], False))

    def _record_writes(self, run: _Run, op: Op, time: float) -> None:
        for variable in op.writes:
            self.versions[variable] += 1
            self.trace.accesses.append(VariableAccess(
                variable, op.name, run.plan.name, run.step, time, self.versions[variable], True))

    def _complete(self, run: _Run, node: _Node, value: Any) -> None:
        run.values[node.index] = value
        link = self.graph.link
        for dst, nbytes, travels in node.outputs:
            if travels and (link.latency > 0 or link.transfer_time(nbytes) > 0):
                self.env.process(self._transfer(run, node, dst, nbytes))
            else:
                self._arrive(run, node, dst)
        run.remaining -= 1
        if run.remaining == 0:
            run.done.succeed()

    def _transfer(self, run: _Run, node: _Node, dst: int,
                  nbytes: int) -> Generator[simpy.Event, Any, None]:
        env, link = self.env, self.graph.link
        target = run.plan.nodes[dst].op
        src_device, dst_device = node.op.device, target.device
        seconds = link.transfer_time(nbytes)
        start = end = env.now
        if seconds > 0:
            with self.out_ports[src_device].request() as out_port:
                yield out_port
                with self.in_ports[dst_device].request() as in_port:
                    yield in_port
                    start = env.now
                    yield env.timeout(seconds)
                    end = env.now
        if link.latency > 0:
            yield env.timeout(link.latency)
        self.trace.transfers.append(TransferRecord(
            node.op.name, target.name, src_device, dst_device, nbytes, run.plan.name, run.step,
            start, end, env.now))
        self._arrive(run, node, dst)

    def _arrive(self, run: _Run, node: _Node, dst: int) -> None:
        run.arrivals[dst].append((node.op.name, self.env.now))
        run.pending[dst] -= 1
        if run.pending[dst] == 0:
            self.env.process(self._execute(run, run.plan.nodes[dst]))
