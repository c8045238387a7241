"""The reference executor: TensorFlow's execution model in one short file, one SimPy process
per op. Read it to learn what simsync simulates; the fast engine
(:class:`~simsync.engine.Engine`) computes the same trace, faster.

TensorFlow's executor keeps, for every op of a ``sess.run``, how many of its inputs are still
to come. An op whose count reaches zero is *ready*: the executor runs it at once, on the
thread that made it ready, and when it is done hands its outputs on, which makes other ops
ready. Here:

1. A **client** (:meth:`ReferenceEngine.client`) is a thread looping over
   ``sess.run(fetches)``: a process that starts each run's ops without inputs, waits until
   every op of the run is done, and goes again.
2. An **op** (:meth:`ReferenceEngine.op`) is a process, started when its last input arrives.
   If it gets from a queue or an accumulator (a token, R gradients), it first waits for that,
   holding nothing. Then it takes its locks and its devices, one by one in sorted order, so
   that two ops never hold what the other waits for (a device runs one op at a time, unless
   it is concurrent: a CPU running many small ops). It sees the variables' versions as it
   starts, runs for its cost over its device's speed (a collective adds its ring
   all-reduce), lets go, writes (a new version, unless the update is too stale and dropped),
   puts what it puts, and hands its outputs on.
3. A **tensor** to another device (:meth:`ReferenceEngine.transfer`) holds the sender's
   out-port and the receiver's in-port for ``bytes / bandwidth``, then arrives one latency
   later.
4. What outlives a run is shared by the clients: the variables' versions, the queues and the
   accumulators (what a put and a get do is defined once, in :mod:`simsync.ir.resources`), a
   pool of runs (asynchronous workers), a staleness bound (stale-synchronous parallel), the
   global step that stops them (``until``); a daemon (a queue runner) loops until the others
   are done.

Everything waits first come first served and happens in SimPy's order, and the compute times
come from the fast engine's seeded streams (:mod:`simsync.draws`), so where no host's
cores are shared (``graph.host_cores`` empty: each device has a core of its own) the trace is
the fast engine's, record for record and bit for bit (all but ``events``, the count of SimPy's
events, which differ and are not kept here); ``tests/test_reference_engine.py`` holds the two
to it on every bundled scenario and on random graphs. Left out, by design: the fast engine's
model of TensorFlow's inter-op thread pool (a graph with ``host_cores`` is refused), and what
guards against mistakes rather than models TensorFlow: a deadlock's explanation (here it only
names who is stuck) and the stop of an endless client whose runs change nothing (here it
loops for ever).

>>> from simsync.patterns import tiny_example
>>> trace = ReferenceEngine(tiny_example(), steps=3).run()
>>> [round(s.duration, 6) for s in trace.steps]
[0.02, 0.02, 0.02]
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from simsync.draws import DrawStreams
from simsync.errors import SimulationError
from simsync.ir import (
    Client,
    Graph,
    Link,
    Op,
    Resource,
    Tensor,
    communication_time,
    crosses_devices,
    op_speed,
    run_order,
    tensor_link,
)
from simsync.ir.resources import ENQUEUE, Action, Got, Put, ResourceState, new_state
from simsync.kinds import check_graph, fresh_enough, kind_of
from simsync.trace import (
    OpRecord,
    Read,
    ResourceEvent,
    StepRecord,
    Trace,
    TransferRecord,
    Update,
    VariableAccess,
)

__all__ = ["ReferenceEngine", "run_reference"]

Process = Generator[simpy.Event, Any, None]


class ReferenceEngine:
    """Run every client of ``graph`` for ``steps`` steps, compute times drawn from ``seed``.

    :meth:`run` returns the :class:`~simsync.trace.Trace` (when things happened; the replay
    computes the values from it, as after the fast engine). Raises
    :class:`~simsync.errors.SimulationError` for a graph whose hosts share cores, and from
    :meth:`run` on a deadlock (``trace`` then holds what happened until then).
    """

    def __init__(self, graph: Graph, *, steps: int, seed: int = 0) -> None:
        check_graph(graph, values=False)
        if graph.host_cores:
            hosts = ", ".join(sorted(graph.host_cores))
            raise SimulationError(f"the reference executor gives each device a core: {hosts} share")
        self.graph, self.steps, self.seed = graph, steps, seed
        self.env = env = simpy.Environment()
        self.trace = Trace(source="simulator")
        self.devices = {name: Place(env) for name, d in graph.devices.items() if not d.concurrent}
        self.locks = {name: Place(env) for op in graph.ops() for name in op.locks}
        self.out_ports = {name: Place(env) for name in graph.devices}
        self.in_ports = {name: Place(env) for name in graph.devices}
        self.resources = {name: Stateful(env, r) for name, r in graph.resources.items()}
        self.versions = dict.fromkeys(graph.variables, 0)  # every write makes a new version
        self.counters = {name: 0 for name, v in graph.variables.items() if v.counter}
        self.pool = sum(c.steps or steps for c in graph.clients if c.shared_steps)
        self.working = sum(1 for c in graph.clients if not c.daemon)  # daemons stop after
        self.finished = {c.name: 0 for c in graph.clients if c.staleness_bound is not None}
        self.slowest: float = 0  # runs every bounded client has done (inf: no bound any more)
        self.behind: list[tuple[int, simpy.Event]] = []  # (runs it waits for, its event)

    def run(self) -> Trace:
        """Simulate until nothing is left to happen."""
        for name, resource in self.resources.items():  # a queue's tokens at the start
            if (start := resource.state.start()) is not None:
                self.trace.resources.append(ResourceEvent(name, ENQUEUE.name,
                    f"{name}/initial_tokens", "", 0, 0.0, start.value, start.amount))  # fmt: skip
        clients = self.graph.clients
        loops = [self.env.process(self.client(i, client)) for i, client in enumerate(clients)]
        self.env.run()
        stuck = [c.name for c, loop in zip(clients, loops, strict=True)
                 if not loop.triggered and not c.daemon]  # fmt: skip
        if stuck:  # a daemon left waiting is no deadlock
            raise SimulationError(f"deadlock: {', '.join(stuck)} wait, and nothing can move")
        return self.trace

    def client(self, index: int, client: Client) -> Process:
        """A thread looping over ``sess.run(client.fetches)``."""
        env, ops, bound = self.env, run_order(self.graph, client.fetches), client.staleness_bound
        groups = {o.cost.group: o.cost for o in map(self.graph.op, ops) if o.cost.group}
        draws = DrawStreams(self.seed, index, groups)  # a tower's compute time, step by step
        endless = client.shared_steps or client.daemon or client.until is not None
        for step in itertools.count() if endless else range(client.steps or self.steps):
            if client.until is not None and self.versions[client.until] >= self.steps:
                break  # the global step reached the end
            if client.daemon and self.working == 0:
                break  # the others are done
            if bound is not None and step - bound > self.slowest:  # stale-synchronous
                self.behind.append((step - bound, waited := env.event()))
                yield waited  # until every bounded client has done step - bound runs
            if client.shared_steps:  # one more run from the common pool, if any is left
                if self.pool == 0:
                    break
                self.pool -= 1
                if self.pool == 0:  # nobody need wait for a client that will stop
                    self.wake(math.inf)
            start = env.now
            for seconds in (client.overhead, client.run_work, client.run_latency):
                if seconds > 0:  # sess.run's own time before the first op
                    yield env.timeout(seconds)
            pending = {name: len(self.graph.inputs(name)) for name in ops}
            run = Run(client.name, step, draws.step(step), pending, len(ops), env.event())
            for name in [name for name in ops if pending[name] == 0]:  # no inputs: ready
                self.start(self.op(run, name))
            yield run.done
            self.trace.steps.append(StepRecord(client.name, step, start, env.now))
            if bound is not None:
                self.finished[client.name] += 1
                self.wake(min(self.finished.values()))
        if not client.daemon:
            self.working -= 1

    def wake(self, slowest: float) -> None:
        """Every bounded client has done ``slowest`` runs: wake those who waited for that."""
        self.slowest = max(self.slowest, slowest)
        for runs, event in [waiting for waiting in self.behind if waiting[0] <= self.slowest]:
            self.behind.remove((runs, event))
            event.succeed()

    def op(self, run: Run, name: str) -> Process:
        """One op of a run, from ready to done: TensorFlow's executor running one node."""
        env, op, ready, blocked = self.env, self.graph.op(name), self.env.now, 0.0
        action, resource = kind_of(op.kind).action, self.resources.get(op.resource or "")
        room = resource is not None and resource.capacity > 0  # a put waits for room first
        if resource is not None and action is not None and (room or not action.puts):
            amount = 1 if action.sets_counter else op.amount  # a token is one
            got = yield resource.wait(amount, room=action.puts)  # holding nothing
            blocked = env.now - ready
            if got is not None:  # not room to put: a token, or the gradients averaged
                self.got(run, op, action, got)
        places = [self.locks[lock] for lock in sorted(op.locks)]
        places += [self.devices[device] for device in sorted(op.devices) if device in self.devices]
        for place in places:
            yield place.request()
        start = env.now
        self.read(run, op)
        if (duration := self.duration(run, op)) > 0:
            yield env.timeout(duration)
        for place in places:
            place.release()
        self.write(run, op, action)
        if resource is not None and action is not None and action.puts:
            self.put(run, op, action, resource)
        self.trace.ops.append(OpRecord(name, op.kind, op.devices, run.client, run.step, ready,
            start, env.now, tuple(run.arrivals.get(name, ())), None, blocked))  # fmt: skip
        for tensor in self.graph.outputs(name):
            if tensor.dst in run.pending:  # an op this run runs
                self.send(run, tensor)
        run.left -= 1
        if run.left == 0:
            run.done.succeed()

    def duration(self, run: Run, op: Op) -> float:
        """Seconds ``op`` holds its devices: its share of its group's draw, or its fixed cost,
        at its slowest device's speed; plus a collective's ring all-reduce."""
        cost = op.cost
        base = run.draws[cost.group] if cost.group is not None else cost.mean
        ring = communication_time(self.graph, op)
        return base * cost.fraction / op_speed(self.graph, op) + cost.overhead + ring

    def send(self, run: Run, tensor: Tensor) -> None:
        """Hand a tensor on: at once, or across a link that takes time."""
        if crosses_devices(self.graph, tensor):
            link = tensor_link(self.graph, tensor)
            if link.transfer_time(tensor.nbytes) > 0 or link.latency > 0:
                self.start(self.transfer(run, tensor, link))
                return
        self.arrive(run, tensor.src, tensor.dst)

    def transfer(self, run: Run, tensor: Tensor, link: Link) -> Process:
        """A tensor crossing to another device: out-port, in-port, the bytes, the latency."""
        env, seconds = self.env, link.transfer_time(tensor.nbytes)
        src, dst = self.graph.op(tensor.src).device, self.graph.op(tensor.dst).device
        start = env.now
        if seconds > 0:
            yield self.out_ports[src].request()
            yield self.in_ports[dst].request()
            start = env.now
            yield env.timeout(seconds)
            self.in_ports[dst].release()
            self.out_ports[src].release()
        end = env.now
        if link.latency > 0:
            yield env.timeout(link.latency)
        self.trace.transfers.append(TransferRecord(tensor.src, tensor.dst, src, dst,
            tensor.nbytes, run.client, run.step, start, end, env.now))  # fmt: skip
        self.arrive(run, tensor.src, tensor.dst)

    def arrive(self, run: Run, src: str, dst: str) -> None:
        """An input of ``dst`` arrived; if it was the last, ``dst`` is ready: start it."""
        run.arrivals.setdefault(dst, []).append((src, self.env.now))
        run.pending[dst] -= 1
        if run.pending[dst] == 0:
            self.start(self.op(run, dst))

    def start(self, process: Process) -> None:
        """Run ``process`` at once up to its first wait, then on as a SimPy process: TensorFlow
        runs a ready op at once, on the thread that made it ready, where ``env.process`` would
        start it only at SimPy's next event."""
        try:
            first = next(process)
        except StopIteration:  # it never had to wait: done already
            return
        self.env.process(_go_on(first, process))

    # -- what the run writes down: versions, the ledger of updates, resource events ---------
    def read(self, run: Run, op: Op) -> None:
        """``op`` starts: the versions of the variables it reads (the run keeps its first)."""
        if not op.reads:
            return
        versions = tuple(self.versions[variable] for variable in op.reads)
        self.trace.reads.append(Read(run.client, run.step, op.name, versions))
        for variable, version in zip(op.reads, versions, strict=True):
            run.read.setdefault(variable, version)
            self.trace.accesses.append(VariableAccess(variable, op.name, run.client, run.step,
                                                      self.env.now, version, False))  # fmt: skip

    def write(self, run: Run, op: Op, action: Action | None) -> None:
        """``op`` ends: its writes make new versions (a counter counts one more, or takes the
        token it got), unless the update is staler than ``op.max_staleness``: dropped."""
        token = run.token if action is not None and action.sets_counter else None
        if token is None and op.writes:  # an update: a line of the ledger
            before = self.versions[op.writes[0]]
            read = run.read.get(op.writes[0], before)
            applied = bool(fresh_enough(before, read, op.max_staleness))
            self.trace.updates.append(
                Update(run.client, run.step, op.name, read, before, applied, self.env.now)
            )
            if not applied:
                return
        for variable in op.writes:
            self.versions[variable] += 1
            if variable in self.counters:
                self.counters[variable] = self.counters[variable] + 1 if token is None else token
            self.trace.accesses.append(VariableAccess(variable, op.name, run.client, run.step,
                                       self.env.now, self.versions[variable], True))  # fmt: skip

    def got(self, run: Run, op: Op, action: Action, got: Got[Any]) -> None:
        """``op`` got a token (its local step), or gradients (which arrive as its inputs)."""
        run.token = got.value if action.sets_counter else run.token
        run.arrivals.setdefault(op.name, []).extend(got.items)
        self.trace.resources.append(ResourceEvent(str(op.resource), action.name, op.name,
            run.client, run.step, self.env.now, got.value, got.amount))  # fmt: skip

    def put(self, run: Run, op: Op, action: Action, resource: Stateful) -> None:
        """``op`` puts its first counter (a worker's local step, the global step)."""
        value = next((self.counters[v] for v in op.reads if v in self.counters), 0)
        put = resource.put(value, op.amount, (op.name, self.env.now))
        self.trace.resources.append(ResourceEvent(str(op.resource), action.name, op.name,
            run.client, run.step, self.env.now, put.value, put.amount, put.accepted))  # fmt: skip


def _go_on(event: simpy.Event, process: Process) -> Process:
    """The rest of a process started at once: wait for each event it yields."""
    while True:
        value = yield event
        try:
            event = process.send(value)
        except StopIteration:
            return


@dataclass
class Run:
    """One ``sess.run`` in flight."""

    client: str
    step: int
    draws: dict[str, float]  # this step's compute time of each cost group (a tower's)
    pending: dict[str, int]  # per op of the run: inputs still to come
    left: int  # ops not done yet
    done: simpy.Event
    arrivals: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)  # the version of each variable read
    token: int = 0  # the token its dequeue got: the worker's local step


class Place:
    """A device, a lock or a port: one at a time, first come first served."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env, self.busy, self.queue = env, False, deque[simpy.Event]()

    def request(self) -> simpy.Event:
        granted = self.env.event()
        if self.busy:
            self.queue.append(granted)
        else:
            self.busy = True
            granted.succeed()
        return granted

    def release(self) -> None:
        if self.queue:
            self.queue.popleft().succeed()  # straight to the next in line
        else:
            self.busy = False


class Stateful:
    """A queue or an accumulator: its state, and the ops waiting on it first come first served
    (to get from it, or for room to put into a queue with a capacity)."""

    def __init__(self, env: simpy.Environment, resource: Resource) -> None:
        self.env, self.capacity = env, resource.capacity
        self.gets: deque[tuple[int, simpy.Event]] = deque()
        self.rooms: deque[tuple[int, simpy.Event]] = deque()
        self.state: ResourceState[tuple[str, float]] = new_state(
            resource.kind, resource.initial, resource.capacity, resource.item
        )

    def wait(self, amount: int, room: bool) -> simpy.Event:
        event = self.env.event()
        (self.rooms if room else self.gets).append((amount, event))
        self.serve()
        return event

    def put(self, value: int, amount: int, item: tuple[str, float]) -> Put:
        put = self.state.do_put(value, amount, item)
        self.serve()
        return put

    def serve(self) -> None:
        while self.gets and (got := self.state.do_get(self.gets[0][0])) is not None:
            self.gets.popleft()[1].succeed(got)
        while self.rooms and self.state.do_room(self.rooms[0][0]):
            self.rooms.popleft()[1].succeed(None)


def run_reference(graph: Graph, steps: int, seed: int = 0) -> Trace:
    """The trace of ``graph`` run for ``steps`` steps on the reference executor: the
    :class:`~simsync.trace.Executor` protocol, as :func:`simsync.engine.run_graph`."""
    return ReferenceEngine(graph, steps=steps, seed=seed).run()
