"""Asynchronous training on TensorFlow: one Python thread per worker, one shared session.

As in seed 002, each thread loops ``sess.run(train_op)`` with its own worker's train op, and
nothing coordinates them but the variables they share. Every run fetches the versions its read
saw and the version its apply found (and, with ``max_staleness``, whether the update was kept),
so every update of the run is in the ledger, the same :class:`~simsync.trace.Update` records the
simulator writes.

The runs come from one pool, like threads that stop at a global step limit: ``warmup + steps +
timing_steps`` per worker. They are numbered in the order threads take them: the first
``warmup`` x N are untraced, the next ``steps`` x N may be traced (``FULL_TRACE``, op by op),
the rest are untraced and timed (tracing costs time of its own). TensorFlow traces one run at a
time ("Another profiling session active"), so a run of the middle phase is traced only if no
other run is being traced just then; the others stay untraced rather than wait, which would
change the race being observed. With a ``staleness_bound`` s a thread starts
its run k only once every thread has finished k - s runs: a condition variable, as a real
stale-synchronous client would use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from simsync.tf_backend.session.prepare import (
    Feeder,
    Setup,
    TensorFlowRun,
    record_accesses,
    run_once,
)
from simsync.tf_backend.session.progress import StepProgress
from simsync.tf_backend.session.tracing import NodeCensus, traced_step
from simsync.trace import OpRecord, StepRecord, Trace, Update

__all__ = ["run_async"]


def run_async(
    setup: Setup,
    warmup: int,
    timing_steps: int | None,
    on_progress: Callable[[str], None] | None = None,
    trace_ops: bool = True,
) -> TensorFlowRun:
    """Run every worker's thread until the pool of runs is empty; return the whole ledger.
    ``on_progress`` is told how many runs are done and about how long the rest will take.
    Without ``trace_ops`` no run is traced op by op (each is still in the ledger)."""
    tf, scenario, lowered = setup.tf, setup.scenario, setup.lowered
    clients = setup.graph.clients
    steps = scenario.run.steps
    timing = steps if timing_steps is None else timing_steps
    bound = clients[0].staleness_bound
    pool = _Pool(len(clients), warmup, steps, timing, bound, on_progress)
    pool.tracing = trace_ops
    record = _Record(setup, pool)
    workers = [_Worker(setup, index, pool, record) for index in range(len(clients))]
    with tf.compat.v1.Session(graph=lowered.graph, config=setup.config) as session:
        session.run(lowered.init)
        record.base = time.time()
        threads = [
            threading.Thread(target=w.loop, args=(session,), name=w.name, daemon=True)
            for w in workers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if pool.error is not None:
            raise pool.error
        params = session.run(lowered.variables)
    record.trace.params = params
    work_rows = {name: rows for w in workers for name, rows in w.feeder.work_rows.items()}
    return TensorFlowRun(
        record.trace,
        record.losses,
        params,
        setup.plan,
        tf.__version__,
        setup.seconds_per_row,
        warmup,
        record.census,
        work_rows,
        record.timed,
        record.phases,
    )


class _Pool:
    """The common pool of runs, the phases of its tickets, and the stale-synchronous clocks."""

    def __init__(
        self,
        workers: int,
        warmup: int,
        steps: int,
        timing: int,
        bound: int | None,
        on_progress: Callable[[str], None] | None = None,
    ) -> None:
        self.workers, self.bound = workers, bound
        self.traced_from, self.timed_from = warmup * workers, (warmup + steps) * workers
        self.total = (warmup + steps + timing) * workers
        self.taken = 0
        self.finished = [0] * workers
        self.error: BaseException | None = None
        self.changed = threading.Condition()
        self.tracer = threading.Lock()  # one traced run at a time
        self.tracing = True  # False: no run is traced op by op
        self.progress = StepProgress(self.total, on_progress)

    def take(self, worker: int, step: int) -> str | None:
        """The phase of this worker's next run, once the bound allows it; None: stop."""
        with self.changed:
            while (
                self.bound is not None
                and self.error is None
                and self.taken < self.total
                and min(self.finished) < step - self.bound
            ):
                self.changed.wait()
            if self.error is not None or self.taken >= self.total:
                return None
            ticket, self.taken = self.taken, self.taken + 1
        if ticket < self.traced_from:
            return "warmup"
        return "traced" if ticket < self.timed_from else "timed"

    def done(self, worker: int) -> None:
        with self.changed:
            self.finished[worker] += 1
            self.changed.notify_all()
        self.progress.step()

    def fail(self, error: BaseException) -> None:
        with self.changed:
            self.error = self.error or error
            self.changed.notify_all()


class _Record:
    """What the threads leave behind, appended under one lock."""

    def __init__(self, setup: Setup, pool: _Pool) -> None:
        self.setup, self.pool = setup, pool
        self.trace = Trace(source="tensorflow")
        self.census = NodeCensus()
        self.losses: list[float] = []
        self.timed: list[tuple[int, float]] = []
        self.phases: dict[tuple[str, int], str] = {}
        self.base = 0.0
        self.lock = threading.Lock()


class _Worker:
    """One thread: its feeds, its fetches, its loop."""

    def __init__(self, setup: Setup, index: int, pool: _Pool, record: _Record) -> None:
        graph, lowered = setup.graph, setup.lowered
        self.setup, self.index, self.pool, self.record = setup, index, pool, record
        self.name = graph.clients[index].name
        self.feeder = Feeder(setup.scenario, graph, lowered, setup.seconds_per_row, index)
        ops = self.feeder.ops
        # what the lowering records versions for: the ops that read, and those that write
        self.reads = [op for op in ops if op.name in lowered.read_versions]
        self.applies = [op for op in ops if op.name in lowered.write_versions]
        self.fetches = {
            "train": lowered.fetches[self.name],
            "losses": {t: lowered.losses[t] for t in sorted(self.feeder.batches)},
            "reads": {op.name: lowered.read_versions[op.name] for op in self.reads},
            "writes": {op.name: lowered.write_versions[op.name] for op in self.applies},
            "kept": {
                op.name: lowered.applied[op.name]
                for op in self.applies
                if op.name in lowered.applied
            },
        }

    def loop(self, session: Any) -> None:
        try:
            step = 0
            while (phase := self.pool.take(self.index, step)) is not None:
                self.run(session, step, phase)
                self.pool.done(self.index)
                step += 1
        except BaseException as error:  # handed to the main thread, which raises it
            self.pool.fail(error)

    def run(self, session: Any, step: int, phase: str) -> None:
        traced = (
            self.pool.tracing and phase == "traced" and self.pool.tracer.acquire(blocking=False)
        )
        try:
            self._run(session, step, phase if traced or phase != "traced" else "untraced", traced)
        finally:
            if traced:
                self.pool.tracer.release()

    def _run(self, session: Any, step: int, phase: str, traced: bool) -> None:
        out, metadata, started, ended = run_once(
            self.setup.tf,
            session,
            self.fetches,
            self.feeder.feeds(step),
            traced,
            f"{self.name}'s step {step}",
        )
        self._record(step, phase, started, ended, out, metadata)

    def _record(
        self,
        step: int,
        phase: str,
        started: float,
        ended: float,
        out: dict[str, Any],
        metadata: Any,
    ) -> None:
        record = self.record
        losses = out["losses"]
        loss = float(sum(losses.values()) / len(losses)) if losses else None
        with record.lock:
            base = record.base
            trace = record.trace
            if loss is not None:
                record.losses.append(loss)
            record.phases[(self.name, step)] = phase
            trace.steps.append(StepRecord(self.name, step, started - base, ended - base, loss))
            if phase == "timed":
                record.timed.append((step, ended - started))
            records: list[OpRecord] = []
            if metadata is not None:
                tower_losses = {f"{self.name}/loss": loss} if loss is not None else {}
                records, transfers = traced_step(
                    metadata.step_stats,
                    self.setup.graph,
                    step,
                    base,
                    record.census,
                    tower_losses,
                    self.name,
                )
                trace.ops.extend(records)
                trace.transfers.extend(transfers)
            record_accesses(
                trace,
                out,
                self.name,
                step,
                {r.op: r for r in records},
                default=ended - base,
                kept=out["kept"],
            )
            for apply in self.applies:
                variable = apply.writes[0]
                read = min(
                    int(out["reads"][r.name][variable]) for r in self.reads if variable in r.reads
                )
                before = out["writes"][apply.name]
                kept = bool(out["kept"].get(apply.name, True))
                trace.updates.append(
                    Update(
                        self.name, step, apply.name, read, int(before[variable]), kept, ended - base
                    )
                )
