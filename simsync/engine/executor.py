"""The SimPy executor: TensorFlow's execution model as a discrete-event simulation.

Rules, as TensorFlow's executor follows them:

1. A client runs ``sess.run(fetches)``: after the client's fixed overhead, the fetches and their
   ancestors execute; the call returns when all of them have finished. A client's runs are
   strictly one after another.
2. An op becomes *ready* when every input tensor has arrived; it then waits for its locks, its
   device (one op at a time per device, unless the device is concurrent) and, if the host's
   cores are shared, for a core; busy cores slow each other by the host's core efficiency,
   re-decided whenever an op on them starts or ends (:class:`~simsync.engine.resources.Cores`).
   As TensorFlow's executor runs the op an op makes ready on the same thread, the op that
   finished keeps its core for the op whose last input it was (unless that op must wait for
   a lock or a resource, or its devices are busy); the core is kept until that op's devices
   are granted, and goes to whoever asks for a core first meanwhile. Ops that continue a run
   queue before those that start one (the latest first). The clients' own work
   (``sess.run``'s time outside the ops) takes the process's GIL and a core.
3. It runs for its cost divided by its device's speed (collectives: at the slowest
   participant's speed, plus the ring all-reduce time).
4. A tensor to another device is a transfer: it holds the sender's out-port and the receiver's
   in-port for ``bytes / bandwidth``, then arrives one latency later.
5. An op that reads variables records their versions when it starts; one that writes them
   bumps the versions when it ends, and leaves a line in the ledger of updates (dropped
   instead, when staler than its ``max_staleness``).
6. An op that takes from a resource (a token from a queue, R gradients from an accumulator)
   waits for it once its inputs are there, holding no device; one that puts into a resource
   (tokens, a gradient tagged with its worker's local step) does so when it ends. Every such
   event goes into the trace.
7. A client with a ``staleness_bound`` s starts its run k only once every bounded client has
   finished k - s runs (stale-synchronous parallel). Clients with shared steps stop when
   their common pool of runs is empty; clients with ``until`` when that variable's version
   reaches the steps; a daemon client (a queue runner) loops until the others are done. An
   endless client whose runs move nothing that would end its loop (``STALLED_RUNS`` runs in a
   row: a daemon's take no time, a worker's leave its ``until`` variable where it was) would
   never stop: the run ends with a :class:`~simsync.errors.SimulationError` saying so.

Nothing else synchronizes: sync points, waiting, contention and dropped gradients all follow
from these rules. The engine decides only the order of events; the values follow from that
order, computed afterwards by the one replay (:mod:`simsync.kinds.replay`). When nothing can
move while a client still has work, the run ends at once with an explanation: who waits for
what.

Ops and transfers are chains of SimPy callbacks (request -> grant -> timeout -> release), not
processes: the same behaviour with a third fewer events. Only clients are processes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator
from typing import Any

import simpy

from simsync.engine.clocks import Clocks
from simsync.engine.collection import with_collector_paused
from simsync.engine.deadlock import explain_deadlock
from simsync.engine.draws import DrawStreams
from simsync.engine.environment import EngineEnvironment
from simsync.engine.ops import Execution, Node, Output, Plan, Run, Transfer
from simsync.engine.resources import Accumulator, Cores, Slot, TokenQueue
from simsync.errors import SimulationError
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
from simsync.kinds import check_graph, fresh_enough, kind_of, values_skipped
from simsync.kinds.replay import replay
from simsync.numerics import ModelSpec
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

__all__ = ["Engine"]

StepCallback = Callable[[StepRecord], None]
#: runs in a row after which an endless client that moved nothing is stopped with an error
STALLED_RUNS = 1000


def _succeed(event: simpy.Event) -> Callable[[simpy.Event], None]:
    """A callback that makes ``event`` succeed."""

    def callback(_event: simpy.Event) -> None:
        event.succeed()

    return callback


class Engine:
    """Run every client of ``graph`` for ``steps`` steps and return the :class:`Trace`.

    ``model`` turns on the numerics: after the run, the trace is replayed through the model
    (:func:`simsync.kinds.replay.replay`), which gives every step its loss and the variables
    their final values. The graph is checked first (:func:`simsync.kinds.check_graph`): for
    timing without a model, for its values with one; when a ``generic`` op stands where values
    would pass, the run computes none and says why (``Trace.values_skipped``). ``on_step`` is
    called after each finished step (progress bars use it). ``detail=False`` keeps only the
    steps, the reads, the resource events and the ledger of updates, no op, transfer or
    variable-access records: what a million updates need.

    >>> from simsync.patterns import tiny_example
    >>> trace = Engine(tiny_example(), steps=3).run()
    >>> [round(s.duration, 6) for s in trace.steps]
    [0.02, 0.02, 0.02]
    """

    def __init__(
        self,
        graph: Graph,
        *,
        steps: int,
        seed: int = 0,
        model: ModelSpec | None = None,
        on_step: StepCallback | None = None,
        detail: bool = True,
    ) -> None:
        check_graph(graph, model, values=model is not None)
        #: why the run computes no values, though asked to (a generic op in their way)
        self.values_skipped = values_skipped(graph) if model is not None else None
        self.graph, self.seed, self.on_step, self.detail = graph, seed, on_step, detail
        self.model, self.steps = model, steps
        self.env = EngineEnvironment()
        self.trace = Trace(source="simulator")
        self.devices = {d: Slot(self.env) for d in graph.devices}
        self.out_ports = {d: Slot(self.env) for d in graph.devices}
        self.in_ports = {d: Slot(self.env) for d in graph.devices}
        self.cores = {
            h: Cores(self.env, n, graph.core_efficiency.get(h, 1.0))
            for h, n in graph.host_cores.items()
        }
        #: The clients' own work (``Client.overhead``: Python, feeding, fetching) holds the
        #: process's one GIL and a core, when the devices share a host's cores: the clients are
        #: threads of one Python process on that host.
        clients_cores = self.cores.get(LOCALHOST)
        self.client_host = None if clients_cores is None else (Slot(self.env), clients_cores)
        self.versions = dict.fromkeys(graph.variables, 0)
        #: values of the counters: global steps, local steps
        self.counters = {name: 0 for name, v in graph.variables.items() if v.counter}
        self.locks = {name: Slot(self.env) for op in graph.ops() for name in op.locks}
        self.queues = {
            name: TokenQueue(self.env, r)
            for name, r in graph.resources.items()
            if r.kind == "queue"
        }
        self.accumulators = {
            name: Accumulator(self.env, r)
            for name, r in graph.resources.items()
            if r.kind == "accumulator"
        }
        self.clocks = Clocks(self.env, [c for c in graph.clients if c.staleness_bound is not None])
        orders = run_orders(graph, [c.fetches for c in graph.clients])
        self.plans = [
            self._plan(i, c, c.steps or steps, order)
            for i, (c, order) in enumerate(zip(graph.clients, orders, strict=True))
        ]
        self.pool = sum(
            p.steps for p, c in zip(self.plans, graph.clients, strict=True) if c.shared_steps
        )
        #: the clients that are no daemon and have not finished (daemons stop after them)
        self.working = sum(1 for c in graph.clients if not c.daemon)

    # -- planning -------------------------------------------------------------------------
    def _plan(self, index_of_client: int, client: Client, steps: int, order: list[str]) -> Plan:
        graph = self.graph
        index = {op_name: i for i, op_name in enumerate(order)}
        nodes = [self._node(graph.op(op_name), i) for i, op_name in enumerate(order)]
        groups: dict[str, Cost] = {}
        for node in nodes:
            if node.op.cost.group is not None:
                groups[node.op.cost.group] = node.op.cost
            # Inputs in the order the graph declares them (tower order): sums are reproducible.
            node.inputs = [index[tensor.src] for tensor in graph.inputs(node.op.name)]
            node.outputs = [
                self._output(index[tensor.dst], tensor)
                for tensor in graph.outputs(node.op.name)
                if tensor.dst in index
            ]
        roots = [n.index for n in nodes if not n.inputs]
        return Plan(
            index_of_client,
            client.name,
            steps,
            client.overhead,
            nodes,
            roots,
            groups,
            client.staleness_bound,
            client.shared_steps,
            client.until,
            client.daemon,
        )

    def _node(self, op: Op, index: int) -> Node:
        graph = self.graph
        host = graph.devices[op.device].host
        return Node(
            op,
            kind_of(op.kind),
            index,
            devices=[self.locks[name] for name in sorted(op.locks)]
            + [self.devices[d] for d in sorted(op.devices) if not graph.devices[d].concurrent],
            pool=self.cores.get(host),
            fixed=op.cost.mean * op.cost.fraction,
            speed=op_speed(graph, op),
            ring=communication_time(graph, op),
        )

    def _output(self, dst: int, tensor: Tensor) -> Output:
        if not crosses_devices(self.graph, tensor):
            return Output(dst)
        link = tensor_link(self.graph, tensor)
        src, target = self.graph.op(tensor.src), self.graph.op(tensor.dst)
        return Output(
            dst,
            tensor.nbytes,
            link.transfer_time(tensor.nbytes),
            link.latency,
            self.out_ports[src.device],
            self.in_ports[target.device],
        )

    # -- running --------------------------------------------------------------------------
    def run(self) -> Trace:
        """Simulate until every client has finished; explain it if something never can."""
        # a run and its replay make no lasting reference cycles (see _run)
        return with_collector_paused(Engine._run, self)

    def _run(self) -> Trace:
        self._initial_tokens()
        clients = [self._client(plan) for plan in self.plans]
        finished = [self.env.process(client) for client in clients]
        self.env.run()
        stuck = [
            p.name
            for p, f in zip(self.plans, finished, strict=True)
            if not f.triggered and not p.daemon
        ]
        if stuck:
            resources: dict[str, TokenQueue | Accumulator] = {**self.queues, **self.accumulators}
            raise explain_deadlock(self.graph, self.clocks, resources, stuck)
        # a daemon (a queue runner) ends blocked on its resource: let go of its waiting op and
        # its suspended loop, which refer back to the engine (reference cycles that would keep
        # the trace alive until the next full collection)
        for queue in self.queues.values():
            queue.waiters.clear()
        for accumulator in self.accumulators.values():
            accumulator.waiters.clear()
        for client in clients:
            client.close()
        self.trace.events = self.env.events
        if self.values_skipped is not None:
            self.trace.values_skipped = self.values_skipped
        elif self.model is not None:
            self._values(self.model)
        return self.trace

    def _values(self, model: ModelSpec) -> None:
        """The replay of the trace: the variables' values and every step's loss."""
        values = replay(self.graph, self.trace, model, self.seed)
        self.trace.params = values.params
        self.trace.values = values.values
        losses = values.losses
        self.trace.steps = [
            StepRecord(client, step, start, end, losses.get((client, step)))
            for client, step, start, end, _ in self.trace.steps
        ]

    def _initial_tokens(self) -> None:
        for name, queue in self.queues.items():
            if queue.resource.initial:
                self.trace.resources.append(
                    ResourceEvent(
                        name,
                        "enqueue",
                        f"{name}/initial_tokens",
                        "",
                        0,
                        0.0,
                        0,
                        queue.resource.initial,
                    )
                )

    def _client(self, plan: Plan) -> Generator[simpy.Event, Any, None]:
        yield from self._runs(plan)
        if not plan.daemon:
            self.working -= 1

    def _runs(self, plan: Plan) -> Generator[simpy.Event, Any, None]:
        env = self.env
        streams = DrawStreams(self.seed, plan.client, plan.groups)
        endless = plan.shared or plan.daemon or plan.until is not None
        stalled = 0  # runs in a row that moved nothing that ends an endless loop
        for step in itertools.count() if endless else range(plan.steps):
            if plan.until is not None and self.versions[plan.until] >= self.steps:
                break  # the global step reached its end: this worker stops
            if plan.daemon and self.working == 0:
                break  # the others are done: a queue runner is stopped
            if stalled >= STALLED_RUNS:
                raise self._stalled(plan)
            if plan.bound is not None:  # stale-synchronous: wait for the slowest client
                yield from self.clocks.wait(plan.name, step, step - plan.bound)
            if plan.shared:  # one more run from the common pool, if any is left
                if self.pool == 0:
                    break
                self.pool -= 1
                if self.pool == 0:
                    self.clocks.release()  # nobody need wait for a client that has stopped
            draws = streams.step(step) if plan.groups else {}
            run = Run(env, plan, step, draws, self.detail)
            start = env.now
            version = self.versions[plan.until] if plan.until is not None else 0
            if plan.overhead > 0:  # the client's own time before the first op
                yield from self._client_work(plan.overhead)
            for root in plan.roots:
                Execution(self, run, plan.nodes[root])
            yield run.done
            record = StepRecord(plan.name, step, start, env.now)
            self.trace.steps.append(record)
            if plan.until is not None:
                stalled = 0 if self.versions[plan.until] != version else stalled + 1
            elif plan.daemon:
                stalled = 0 if env.now > start else stalled + 1
            if plan.bound is not None:
                self.clocks.tick(plan.name)
            if self.on_step is not None:
                self.on_step(record)

    def _stalled(self, plan: Plan) -> SimulationError:
        """Why an endless client would never stop: its runs move nothing that ends its loop."""
        if plan.until is not None:
            return SimulationError(
                f"client '{plan.name}' ran {STALLED_RUNS} times while '{plan.until}' stayed at "
                f"version {self.versions[plan.until]} (it stops at {self.steps}): no client that "
                f"still runs writes it, so it would never stop"
            )
        return SimulationError(
            f"client '{plan.name}' (a daemon) ran {STALLED_RUNS} times without time passing: its "
            f"runs take no time and wait for nothing, so it would loop for ever at "
            f"{self.env.now:.6g} s; give its ops a cost, or let it wait on a resource"
        )

    def _client_work(self, seconds: float) -> Generator[simpy.Event, Any, None]:
        """A client thread's own work: on a shared host, under the GIL and on a core."""
        if self.client_host is None:
            yield self.env.timeout(seconds)
            return
        gil, cores = self.client_host
        for slot in (gil, cores):
            granted = self.env.event()
            slot.request(_succeed(granted))
            yield granted
        done = self.env.event()
        cores.run(seconds, _succeed(done))
        yield done
        cores.release()
        gil.release()

    # -- resources ------------------------------------------------------------------------
    def resource_wait(self, run: Run, node: Node) -> simpy.Event:
        """The event a taking op (a dequeue, a take) waits for before it may start."""
        op = node.op
        if node.dequeues:
            return self.queues[str(op.resource)].get(run.plan.name, op.name)
        return self.accumulators[str(op.resource)].take(op.amount, run.plan.name, op.name)

    def served(self, run: Run, node: Node, value: Any) -> None:
        """A taking op got what it waited for: a token's value, or the gradients averaged."""
        op, now, client = node.op, self.env.now, run.plan.name
        resource = str(op.resource)
        if node.dequeues:
            run.token = value
            self.trace.resources.append(
                ResourceEvent(resource, "dequeue", op.name, client, run.step, now, value)
            )
        else:
            step = self.accumulators[resource].step
            self.trace.resources.append(
                ResourceEvent(resource, "take", op.name, client, run.step, now, step, value)
            )

    def _put(self, run: Run, node: Node, now: float) -> None:
        """A putting op ends: its gradient reaches the accumulator, or its tokens the queue.
        The value put is the counter the op reads: the worker's local step, the global step."""
        op, resource, client = node.op, str(node.op.resource), run.plan.name
        counter = next((self.counters[v] for v in op.reads if v in self.counters), 0)
        if node.kind.action == "push":
            accepted = self.accumulators[resource].push(counter)
            self.trace.resources.append(
                ResourceEvent(
                    resource, "push", op.name, client, run.step, now, counter, 1, accepted
                )
            )
        else:
            self.queues[resource].put(counter, op.amount)
            self.trace.resources.append(
                ResourceEvent(
                    resource, "enqueue", op.name, client, run.step, now, counter, op.amount
                )
            )

    # -- op by op -------------------------------------------------------------------------
    def finished(self, execution: Execution) -> None:
        """An op has run: its writes land, its puts are made, its outputs go on."""
        run, node, now = execution.run, execution.node, self.env.now
        op = node.op
        if node.dequeues:  # the token becomes the worker's local step
            self._record_writes(run, op, now, run.token)
        elif node.writes and self._update(run, op, now):
            self._record_writes(run, op, now, None)
        if node.puts:
            self._put(run, node, now)
        if self.detail:
            self.trace.ops.append(
                OpRecord(
                    op.name,
                    op.kind,
                    op.devices,
                    run.plan.name,
                    run.step,
                    execution.ready,
                    execution.start,
                    now,
                    tuple(run.arrivals[node.index]),
                    None,
                    execution.blocked,
                )
            )
        for output in node.outputs:
            if output.free:
                self._arrive(run, node, output.dst)
            else:
                Transfer(self, run, node, output)
        run.remaining -= 1
        if run.remaining == 0:
            run.done.succeed()

    def transferred(self, transfer: Transfer, end: float) -> None:
        """A tensor has arrived at its consumer's device."""
        run, node, output = transfer.run, transfer.node, transfer.output
        target = run.plan.nodes[output.dst].op
        if self.detail:
            self.trace.transfers.append(
                TransferRecord(
                    node.op.name,
                    target.name,
                    node.op.device,
                    target.device,
                    output.nbytes,
                    run.plan.name,
                    run.step,
                    transfer.start,
                    end,
                    self.env.now,
                )
            )
        self._arrive(run, node, output.dst)

    def record_reads(self, run: Run, op: Op, time: float) -> None:
        versions = self.versions
        self.trace.reads.append(
            Read(run.plan.name, run.step, op.name, tuple([versions[v] for v in op.reads]))
        )
        for variable in op.reads:
            run.read_versions.setdefault(variable, versions[variable])
            if self.detail:
                self._access(run, op, variable, time, write=False)

    def _update(self, run: Run, op: Op, time: float) -> bool:
        """Write the ledger line of an update about to land; False if it is dropped."""
        variable = op.writes[0]
        before = self.versions[variable]
        read = run.read_versions.get(variable, before)
        applied = bool(fresh_enough(before, read, op.max_staleness))
        self.trace.updates.append(
            Update(run.plan.name, run.step, op.name, read, before, applied, time)
        )
        return applied

    def _record_writes(self, run: Run, op: Op, time: float, token: int | None) -> None:
        """Bump the versions of what ``op`` writes; a counter takes ``token`` if given (a
        local step), else counts one more (a global step)."""
        for variable in op.writes:
            self.versions[variable] += 1
            if variable in self.counters:
                self.counters[variable] = self.counters[variable] + 1 if token is None else token
            if self.detail:
                self._access(run, op, variable, time, write=True)

    def _access(self, run: Run, op: Op, variable: str, time: float, write: bool) -> None:
        """The detail record of a read (the version seen) or a write (the version made)."""
        self.trace.accesses.append(
            VariableAccess(
                variable, op.name, run.plan.name, run.step, time, self.versions[variable], write
            )
        )

    def _arrive(self, run: Run, node: Node, dst: int) -> None:
        if self.detail:
            run.arrivals[dst].append((node.op.name, self.env.now))
        pending = run.pending
        pending[dst] -= 1
        if pending[dst] == 0:
            Execution(self, run, run.plan.nodes[dst])
