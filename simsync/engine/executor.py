"""The SimPy executor: TensorFlow's execution model as a discrete-event simulation.

Rules, as TensorFlow's executor follows them:

1. A client runs ``sess.run(fetches)``: after the client's fixed overhead, the fetches and their
   ancestors execute; the call returns when all of them have finished. A client's runs are
   strictly one after another.
2. An op becomes *ready* when every input tensor has arrived; it then waits for its locks, its
   device (one op at a time per device, unless the device is concurrent, or a logical device
   of a host whose cores are shared) and, if the host's cores are shared, for a thread of
   the host's inter-op pool (:class:`~simsync.engine.resources.Cores`); busy cores slow each
   other by the host's core efficiency, re-decided whenever an op on them starts or ends.
   As TensorFlow's executor runs the op an op makes ready on the same thread, the op that
   finished keeps its thread for the op whose last input it was (unless that op must wait
   for a lock or a resource, or its devices are busy); the thread is kept until that op's
   devices are granted, and goes to whoever asks for one first meanwhile. When every thread
   is busy, the other ops a thread made ready wait at the front of its own queue, a run's
   first ops at the back of a random thread's queue; a free thread takes its own queue's
   front, else steals another's back. The clients' own work (``sess.run``'s time outside
   the ops) takes the process's GIL and a core (while all are busy: the next that a random
   thread's op frees).
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
order, computed afterwards by the replay (:mod:`simsync.replay`, the next stage:
:func:`~simsync.simulation.simulate` calls it). When nothing can move while a client still has
work, the run ends at once with an explanation: who waits for what.

Each client is planned once (:mod:`simsync.engine.plan`); ops and transfers are chains of
SimPy callbacks (request -> grant -> timeout -> release, :mod:`simsync.engine.ops`), not
processes: the same behaviour with a third fewer events. Only clients are processes. What
happened is written down by the :class:`~simsync.engine.recorder.Recorder`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator
from typing import Any

import simpy

from simsync.draws import DrawStreams
from simsync.engine.clocks import Clocks
from simsync.engine.collection import with_collector_paused
from simsync.engine.deadlock import explain_deadlock
from simsync.engine.environment import EngineEnvironment
from simsync.engine.ops import Execution, Run, Transfer
from simsync.engine.plan import Places, Plan, PlannedOp, plans
from simsync.engine.recorder import Recorder
from simsync.engine.resources import Arrived, Cores, Slot, Waitable
from simsync.errors import SimulationError
from simsync.ir import LOCALHOST, Graph, Op
from simsync.ir.resources import Got
from simsync.kinds import check_graph
from simsync.trace import StepRecord, Trace

__all__ = ["Engine", "StepCallback", "run_graph"]

StepCallback = Callable[[StepRecord], None]
#: runs in a row after which an endless client that moved nothing is stopped with an error
STALLED_RUNS = 1000


def _pass_on(waiting: simpy.Event, event: simpy.Event) -> None:
    """Make ``waiting`` succeed with ``event``'s value."""
    waiting.succeed(event.value)


def _succeed(event: simpy.Event) -> Callable[[simpy.Event], None]:
    """A callback that makes ``event`` succeed."""

    def callback(_event: simpy.Event) -> None:
        event.succeed()

    return callback


class Engine:
    """Run every client of ``graph`` for ``steps`` steps and return the :class:`Trace` of when
    everything happened (no values: the replay computes them from it, see
    :func:`simsync.simulation.simulate`).

    The graph is checked first, for timing (:func:`simsync.kinds.check_graph`). ``on_step`` is
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
        on_step: StepCallback | None = None,
        detail: bool = True,
    ) -> None:
        check_graph(graph, values=False)
        self.graph, self.seed, self.on_step, self.detail = graph, seed, on_step, detail
        self.steps = steps
        self.env = EngineEnvironment()
        self.recorder = Recorder(graph, detail)
        self.trace = self.recorder.trace
        #: the variables' versions and the counters' values (kept by the recorder)
        self.versions, self.counters = self.recorder.versions, self.recorder.counters
        self.cores = {
            h: Cores(self.env, n, graph.core_efficiency.get(h, 1.0), seed=f"{seed} {h}")
            for h, n in graph.host_cores.items()
        }
        places = Places(
            devices={d: Slot(self.env) for d in graph.devices},
            out_ports={d: Slot(self.env) for d in graph.devices},
            in_ports={d: Slot(self.env) for d in graph.devices},
            locks={name: Slot(self.env) for op in graph.ops() for name in op.locks},
            cores=self.cores,
        )
        #: The clients' own work (``Client.overhead``: Python, feeding, fetching) takes a core
        #: of its host when the host's cores are shared (the host of the device of its first
        #: fetch), and on this host also the process's one GIL: the clients there are threads
        #: of one Python process. (A cluster's tasks on one machine are processes of their own.)
        gil = Slot(self.env)
        self.client_host: dict[str, tuple[Slot | None, Cores]] = {}
        for client in graph.clients:
            host = graph.devices[graph.op(client.fetches[0]).device].host
            if host in self.cores:
                self.client_host[client.name] = (
                    gil if host == LOCALHOST else None,
                    self.cores[host],
                )
        #: the queues and accumulators, by name, in the graph's order
        self.resources = {name: Waitable(self.env, r) for name, r in graph.resources.items()}
        self.clocks = Clocks(self.env, [c for c in graph.clients if c.staleness_bound is not None])
        self.plans = plans(graph, steps, places)
        self.pool = sum(
            p.steps for p, c in zip(self.plans, graph.clients, strict=True) if c.shared_steps
        )
        #: the clients that are no daemon and have not finished (daemons stop after them)
        self.working = sum(1 for c in graph.clients if not c.daemon)
        self.finished_clients: set[str] = set()
        #: a daemon's tick could free a bounded client: then no daemon's run tells a deadlock
        self.daemons_tick = any(p.daemon and p.bound is not None for p in self.plans)
        #: per resource, the clients that run an op that puts into it, and that take from it
        self.feeders: dict[str, set[str]] = {name: set() for name in self.resources}
        self.takers: dict[str, set[str]] = {name: set() for name in self.resources}
        for plan in self.plans:
            for planned in plan.ops:
                if planned.op.resource is not None and (planned.puts or planned.waits):
                    users = self.feeders if planned.puts else self.takers
                    users[planned.op.resource].add(plan.name)

    # -- running --------------------------------------------------------------------------
    def run(self) -> Trace:
        """Simulate until every client has finished; explain it if something never can."""
        # a run makes no lasting reference cycles (see _run)
        return with_collector_paused(Engine._run, self)

    def _run(self) -> Trace:
        for name, resource in self.resources.items():
            start = resource.state.start()
            if start is not None:
                self.recorder.initial_tokens(name, start)
        clients = [self._client(plan) for plan in self.plans]
        finished = [self.env.process(client) for client in clients]
        self.env.run()
        stuck = [
            p.name
            for p, f in zip(self.plans, finished, strict=True)
            if not f.triggered and not p.daemon
        ]
        if stuck:
            raise explain_deadlock(self.plans, self.clocks, self.resources, stuck)
        # a daemon (a queue runner) ends blocked on its resource: let go of its waiting op and
        # its suspended loop, which refer back to the engine (reference cycles that would keep
        # the trace alive until the next full collection)
        for resource in self.resources.values():
            resource.waiters.clear()
            resource.putters.clear()
        for client in clients:
            client.close()
        self.trace.events = self.env.events
        return self.trace

    def _client(self, plan: Plan) -> Generator[simpy.Event, Any, None]:
        yield from self._runs(plan)
        if not plan.daemon:
            self.working -= 1
            self.finished_clients.add(plan.name)

    def _waiting_for_ever(self) -> list[str]:
        """The clients left, when every one waits for what nothing left can give: the
        staleness bound (no daemon ticks a clock), or a resource that no client left, daemons
        included, puts into (or takes from, for room in a full queue). A daemon that keeps
        looping beside them would hide the deadlock for ever (it only ends when its queue
        blocks it). Else none. (Clients that wait on one another's resources, each still
        able to put into the other's, are not told here.)"""
        left = [p.name for p in self.plans if not p.daemon and p.name not in self.finished_clients]
        waiting = set() if self.daemons_tick else set(self.clocks.blocked)
        alive = {p.name for p in self.plans if p.name not in self.finished_clients}
        for name, resource in self.resources.items():
            if resource.waiters and not self.feeders[name] & alive:
                waiting.update(waiter.client for waiter in resource.waiters)
            if resource.putters and not self.takers[name] & alive:
                waiting.update(waiter.client for waiter in resource.putters)
        return left if left and all(name in waiting for name in left) else []

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
                yield from self._client_work(plan.name, plan.overhead)
            if plan.run_work > 0:  # TensorFlow starting the run: a core, not the GIL
                yield from self._client_work(plan.name, plan.run_work, gil=False)
            if plan.run_latency > 0:  # handing the run to the executor's threads: nothing held
                yield env.timeout(plan.run_latency)
            for root in plan.roots:
                Execution(self, run, plan.ops[root])
            yield run.done
            record = StepRecord(plan.name, step, start, env.now)
            self.trace.steps.append(record)
            if plan.until is not None:
                stalled = 0 if self.versions[plan.until] != version else stalled + 1
            elif plan.daemon:
                stalled = 0 if env.now > start else stalled + 1
                stuck = self._waiting_for_ever()
                if stuck:
                    raise explain_deadlock(self.plans, self.clocks, self.resources, stuck)
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

    def _client_work(
        self, client: str, seconds: float, gil: bool = True
    ) -> Generator[simpy.Event, Any, None]:
        """A client's own work: on a shared host, on a core (and on this host under the
        GIL, unless ``gil`` is False: TensorFlow's own work in a run)."""
        shared = self.client_host.get(client)
        if shared is None:
            yield self.env.timeout(seconds)
            return
        lock, cores = shared
        gil_slot = lock if gil else None
        if gil_slot is not None:
            granted = self.env.event()
            gil_slot.request(_succeed(granted))
            yield granted
        granted = self.env.event()  # a thread of the pool: the event's value
        cores.request(lambda event: _pass_on(granted, event), first=True)
        thread = yield granted
        done = self.env.event()
        cores.run(seconds, _succeed(done))
        yield done
        cores.release(thread)
        if gil_slot is not None:
            gil_slot.release()

    # -- resources ------------------------------------------------------------------------
    def resource_wait(self, run: Run, planned: PlannedOp) -> simpy.Event:
        """The event an op that gets from a resource (a dequeue, a take), or puts into a
        queue with a capacity (room for its items), waits for before it may start."""
        op = planned.op
        resource = self.resources[str(op.resource)]
        if planned.puts:
            return resource.room(op.amount, run.plan.name, op.name)
        # a token (its value the worker's local step) is one, whatever the op's amount
        return resource.get(1 if planned.sets_counter else op.amount, run.plan.name, op.name)

    def record_reads(self, run: Run, op: Op, time: float) -> None:
        """An op that reads variables starts: the versions it sees (the recorder's)."""
        self.recorder.reads(run, op, time)

    def served(self, run: Run, planned: PlannedOp, got: Got[Arrived] | None) -> None:
        """An op got what it waited for (a token, the gradients averaged; room: None)."""
        assert planned.action is not None
        if got is None:  # room for a put: what it puts is recorded when it ends
            return
        if planned.sets_counter:  # a token: it becomes the worker's local step
            run.token = got.value
        self.recorder.got(run, planned.op, planned.action, got, self.env.now)
        if self.detail:  # the pushes a take averaged arrived as its inputs
            run.arrivals[planned.index].extend(item for item in got.items if item is not None)

    def _put(self, run: Run, planned: PlannedOp, now: float) -> None:
        """An op that puts ends: its gradient reaches the accumulator, or its tokens the queue.
        The value put is the counter the op reads: the worker's local step, the global step."""
        op, action = planned.op, planned.action
        assert action is not None
        item = (op.name, now) if self.detail else None
        put = self.resources[str(op.resource)].put(self.recorder.counter_read(op), op.amount, item)
        self.recorder.put(run, op, action, put, now)

    # -- op by op -------------------------------------------------------------------------
    def finished(self, execution: Execution) -> None:
        """An op has run: its writes land, its puts are made, its outputs go on."""
        run, planned = execution.run, execution.planned
        if planned.effects:
            self._effects(run, planned, self.env.now)
        if self.detail:
            self.recorder.executed(execution, self.env.now)
        for output in planned.outputs:
            if output.free:
                self._arrive(run, planned, output.dst)
            else:
                Transfer(self, run, planned, output)
        run.remaining -= 1
        if run.remaining == 0:
            run.done.succeed()

    def _effects(self, run: Run, planned: PlannedOp, now: float) -> None:
        """What an op that writes, puts or sets a counter does as it ends."""
        op, recorder = planned.op, self.recorder
        if planned.sets_counter:  # the token it got becomes the local step
            recorder.writes(run, op, now, run.token)
        elif planned.writes and recorder.update(run, op, now):
            recorder.writes(run, op, now, None)
        if planned.puts:
            self._put(run, planned, now)

    def transferred(self, transfer: Transfer, end: float) -> None:
        """A tensor has arrived at its consumer's device."""
        if self.detail:
            self.recorder.transferred(transfer, end, self.env.now)
        self._arrive(transfer.run, transfer.planned, transfer.output.dst)

    def _arrive(self, run: Run, planned: PlannedOp, dst: int) -> None:
        if self.detail:
            run.arrivals[dst].append((planned.op.name, self.env.now))
        pending = run.pending
        left = pending[dst] - 1
        pending[dst] = left
        if left == 0:
            threads = run.threads
            Execution(self, run, run.plan.ops[dst], threads[planned.index] if threads else None)


def run_graph(graph: Graph, steps: int, seed: int = 0) -> Trace:
    """The trace of ``graph`` run for ``steps`` steps on this engine: the
    :class:`~simsync.trace.Executor` protocol, kept by TensorFlow's executor too.

    >>> from simsync.patterns import tiny_example
    >>> [round(s.duration, 6) for s in run_graph(tiny_example(), 2, seed=0).steps]
    [0.02, 0.02]
    """
    return Engine(graph, steps=steps, seed=seed).run()
