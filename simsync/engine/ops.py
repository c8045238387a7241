"""The pieces of a run in flight: one ``sess.run``, one op executing, one tensor travelling.

Ops and transfers are chains of SimPy callbacks (request -> grant -> timeout -> release), not
processes: the same behaviour with a third fewer events. The :class:`~simsync.engine.Engine`
owns the shared state (places, resources, the recorder); these classes only move one planned
op (:mod:`simsync.engine.plan`) or one tensor along and call back into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

import simpy

from simsync.engine.environment import EngineEnvironment
from simsync.engine.plan import Output, Plan, PlannedOp
from simsync.engine.resources import Arrived, Scheduled
from simsync.ir import Op

if TYPE_CHECKING:
    from simsync.ir.resources import Got

__all__ = ["EngineLike", "Execution", "Run", "Transfer"]


class EngineLike(Protocol):
    """What an op or a tensor in flight calls back into: the engine
    (:class:`~simsync.engine.Engine`), which owns the shared state."""

    @property
    def env(self) -> EngineEnvironment: ...

    def resource_wait(self, run: Run, planned: PlannedOp) -> simpy.Event: ...

    def served(self, run: Run, planned: PlannedOp, got: Got[Arrived] | None) -> None: ...

    def record_reads(self, run: Run, op: Op, time: float) -> None: ...

    def finished(self, execution: Execution) -> None: ...

    def transferred(self, transfer: Transfer, end: float) -> None: ...


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
        "threads",
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
        #: per planned op, when each input arrived (kept with detail only)
        self.arrivals: list[list[tuple[str, float]]] = [[] for _ in plan.ops] if detail else []
        self.remaining = len(plan.ops)
        self.read_versions: dict[str, int] = {}
        self.token = 0  # the token its dequeue took, if any
        self.done = env.event()
        #: per planned op, the thread of the host's pool it ran on (an op that takes no
        #: thread: the one whose op made it ready), None before it runs or outside the pool;
        #: empty when no op of the plan takes a thread (most large graphs: nothing to track)
        self.threads: list[int | None] = [None] * len(plan.ops) if plan.pooled else []


class Execution:
    """One op running: wait for its resource, take its devices one by one, then a core, run,
    release, hand on."""

    __slots__ = (
        "blocked",
        "core",
        "duration",
        "engine",
        "held",
        "origin",
        "planned",
        "ready",
        "run",
        "start",
    )

    def __init__(
        self, engine: EngineLike, run: Run, planned: PlannedOp, origin: int | None = None
    ) -> None:
        self.engine, self.run, self.planned = engine, run, planned
        self.ready = self.start = engine.env.now
        self.blocked = 0.0
        self.core = False
        #: the thread whose op made this one ready (None: a run's first op)
        self.origin = origin
        seconds = planned.seconds  # a fixed cost, else the share of this step's draw
        self.duration = seconds if seconds is not None else planned.duration(run.draws)
        if planned.single:  # the usual: one device, no resource to wait for, no pool of cores
            self.held = 1
            planned.devices[0].request(self._begin)
            return
        self.held = 0  # devices (and locks) granted so far
        if planned.waits:  # blocked on a resource, holding no device
            engine.resource_wait(run, planned).callbacks.append(self._served)
        else:
            self._acquire(None)

    def _served(self, event: simpy.Event) -> None:
        self.blocked = self.engine.env.now - self.ready
        self.engine.served(self.run, self.planned, cast("Got[Arrived] | None", event.value))
        self._acquire(None)

    def _acquire(self, _event: simpy.Event | None) -> None:
        devices, held, pool = self.planned.devices, self.held, self.planned.pool
        cores = pool is not None and self.duration > 0
        if held < len(devices):
            self.held = held + 1
            # once the last device is granted, begin at once unless a core is needed too
            last = self.held == len(devices) and not cores
            devices[held].request(self._begin if last else self._acquire)
        elif pool is not None and cores:
            self.core = True
            thread = pool.claim(self.run, self.planned.index)  # kept by the op before
            if thread is not None:
                self.run.threads[self.planned.index] = thread
                self._begin(None)
            else:
                pool.request(self._begin, self.origin)
        else:
            self._begin(None)

    def _begin(self, event: simpy.Event | None) -> None:
        engine, planned, run = self.engine, self.planned, self.run
        self.start = start = engine.env.now
        if self.core:
            if event is not None:  # granted by the pool (not kept for it by the op before)
                run.threads[planned.index] = event.value
        elif run.threads:  # no thread of its own: it runs on the one that made it ready
            run.threads[planned.index] = self.origin
        if planned.reads:  # a read sees the variables as they are when it starts
            engine.record_reads(run, planned.op, start)
        if self.core and planned.pool is not None:  # busy cores slow each other
            planned.pool.run(self.duration, self._finish)
        elif self.duration > 0:
            Scheduled(engine.env, self._finish, self.duration)
        else:
            self._finish(None)

    def _finish(self, _event: simpy.Event | None) -> None:
        for device in self.planned.devices:
            device.release()
        if not self.core:
            self.engine.finished(self)
            return
        planned, run = self.planned, self.run
        cores, thread = planned.pool, run.threads[planned.index]
        assert cores is not None and thread is not None, "an op that held a thread knows which"
        successor = self._successor()
        if successor is not None:  # the run's next op goes on here
            cores.keep(run, successor, thread)
        self.engine.finished(self)
        if successor is None:
            # after the outputs went on: a consumer that asked for a core meanwhile goes first
            cores.release(thread)

    def _successor(self) -> int | None:
        """The op of this run to keep the core for: the first consumer on the same cores that
        this op makes ready (its last missing input), with no lock or resource to wait for and
        no device busy now (a core held meanwhile could deadlock)."""
        run, pool = self.run, self.planned.pool
        for output in self.planned.outputs:
            after = run.plan.ops[output.dst]
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

    __slots__ = ("engine", "output", "planned", "run", "start")

    def __init__(self, engine: EngineLike, run: Run, planned: PlannedOp, output: Output) -> None:
        self.engine, self.run, self.planned, self.output = engine, run, planned, output
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
