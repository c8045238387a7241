"""Run a scenario's graph in TensorFlow, step by step, and record what happened as a Trace.

The client does what the seeds' training loops do: ``sess.run(train_op)`` once per step, with
the step's batches and work sizes fed in. Three phases, all of which train (the simulator runs
them too):

1. ``warmup`` steps, untraced;
2. ``[run] steps`` steps with ``FULL_TRACE``: op by op, for the structure check and op times;
3. ``timing_steps`` steps untraced, whose wall times are the measured step times: tracing has
   a cost of its own (milliseconds per step here) that must not count as the graph's.

Then, when asked, ``rounds`` rounds of *interleaved* steps: in each round the scenario's own
configuration and every :class:`Variant` (the same graph, some devices doing more or no work)
run one step each, with the same draws, in an order that alternates from round to round. A
slow spell of the machine then hits every configuration alike, and the ratios of their step
times, round by round, measure what the configuration changes and nothing else.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simsync.findings import ONE_TOWER_WORKING
from simsync.ir import Graph, racing_clients
from simsync.patterns import tower_device
from simsync.scenario import Scenario
from simsync.scenario.schema import MAX_SPEED
from simsync.tf_backend.session.lower import Lowered
from simsync.tf_backend.session.prepare import (
    Feeder,
    TensorFlowRun,
    prepare,
    record_accesses,
    run_once,
)
from simsync.tf_backend.session.progress import StepProgress
from simsync.tf_backend.session.tracing import NodeCensus, traced_step
from simsync.trace import Executor, StepRecord, Trace

__all__ = ["Variant", "run_on_tensorflow", "tensorflow_executor"]


#: Interleaved rounds stop after this many seconds, once :data:`MIN_ROUNDS` are done.
ROUNDS_SECONDS = 30.0
MIN_ROUNDS = 8


@dataclass(frozen=True)
class Variant:
    """Another configuration of the same graph, run interleaved with the scenario's own: the
    devices in ``speeds`` work at that speed (the fastest allowed: next to no work)."""

    name: str
    speeds: Mapping[str, float]

    def apply(self, scenario: Scenario) -> Scenario:
        """``scenario`` with this variant's speeds, for the simulator to predict it."""
        speeds = tuple(
            self.speeds.get(tower_device(tower), speed)
            for tower, speed in enumerate(scenario.cluster.speeds)
        )
        return dataclasses.replace(
            scenario, cluster=dataclasses.replace(scenario.cluster, speeds=speeds)
        )

    @classmethod
    def one_tower_working(cls, towers: int) -> Variant:
        """Every tower but the first with next to no work: the first one working alone."""
        return cls(ONE_TOWER_WORKING, {tower_device(t): MAX_SPEED for t in range(1, towers)})


def tensorflow_executor(scenario: Scenario, *, warmup: int = 2) -> Executor:
    """TensorFlow's session as an :class:`~simsync.trace.Executor`, for graphs of
    ``scenario``'s model (the numbers a graph's ops compute are its model's): a graph run for
    ``steps`` traced steps after ``warmup`` untimed ones, its seed the run's; the trace holds
    the traced steps, as :func:`run_on_tensorflow`'s."""

    def run(graph: Graph, steps: int, seed: int) -> Trace:
        ran = run_on_tensorflow(
            scenario.with_run(steps=steps, seed=seed), warmup=warmup, timing_steps=0, graph=graph
        )
        return ran.trace

    return run


def run_on_tensorflow(
    scenario: Scenario,
    *,
    warmup: int = 2,
    seconds_per_row: float | None = None,
    timing_steps: int | None = None,
    graph: Graph | None = None,
    variants: Sequence[Variant] = (),
    rounds: int = 0,
    on_progress: Callable[[str], None] | None = None,
    trace_ops: bool = True,
) -> TensorFlowRun:
    """Run ``warmup``, then ``[run] steps`` traced, then ``timing_steps`` (default: as many)
    untraced steps of ``scenario``. The work ops are sized with ``seconds_per_row`` (a
    calibration's), or with a measurement of this machine's speed made for this run.

    With several clients (asynchronous workers) the steps are per client, taken from a common
    pool by one thread per client (see :mod:`simsync.tf_backend.session.asynchronous`). ``graph``:
    run this graph instead of the one the scenario's pattern builds (a student's).
    ``on_progress`` is told how many steps are done and about how long the rest will take.
    Without ``trace_ops`` the ``[run] steps`` are not traced op by op (tracing costs time of
    its own): the trace keeps each step's times and loss, and the ledger."""
    setup = prepare(scenario, seconds_per_row, graph)
    if racing_clients(setup.graph):
        from simsync.tf_backend.session.asynchronous import run_async

        return run_async(setup, warmup, timing_steps, on_progress, trace_ops)
    tf, graph, plan, lowered = setup.tf, setup.graph, setup.plan, setup.lowered
    config, seconds_per_row = setup.config, setup.seconds_per_row
    client = _Client(tf, scenario, graph, lowered, seconds_per_row)
    with tf.compat.v1.Session(graph=lowered.graph, config=config) as session:
        session.run(lowered.init)
        traced_end = warmup + scenario.run.steps
        timing = scenario.run.steps if timing_steps is None else timing_steps
        progress = StepProgress(traced_end + timing, on_progress)
        for step in range(traced_end + timing):
            kept = warmup <= step < traced_end
            seconds = client.step(session, step, traced=kept and trace_ops, kept=kept)
            if step >= traced_end:
                client.timed.append((step, seconds))
            progress.step()
        if variants and on_progress is not None:
            on_progress("TensorFlow: the scenario and its variants, in alternating rounds")
        final = session.run(lowered.variables)
        first = traced_end + timing
        interleaved = dict(client.interleave(session, first, variants, rounds))
    trainable = {n for n, v in graph.variables.items() if v.trainable}
    params = {n: value for n, value in final.items() if n in trainable}
    values = {n: value for n, value in final.items() if n not in trainable}
    client.trace.params, client.trace.values = params, values
    return TensorFlowRun(
        client.trace,
        client.losses,
        params,
        plan,
        tf.__version__,
        seconds_per_row,
        warmup,
        client.census,
        client.work_rows,
        client.timed,
        values=values,
        moving=client.moving,
        interleaved=interleaved,
        interleaved_work=client.interleaved_work,
    )


class _Client:
    """The training loop: feeds, one ``sess.run`` per step, and the trace it leaves."""

    def __init__(
        self, tf: Any, scenario: Scenario, graph: Graph, lowered: Lowered, seconds_per_row: float
    ) -> None:
        self.tf, self.scenario, self.graph, self.lowered = tf, scenario, graph, lowered
        self.feeder = Feeder(scenario, graph, lowered, seconds_per_row)
        self.work_rows = self.feeder.work_rows
        self.trace = Trace(source="tensorflow")
        self.census = NodeCensus()
        self.losses: list[float] = []
        self.timed: list[tuple[int, float]] = []
        self.base: float | None = None
        self.moving: list[dict[str, Any]] = []
        self.interleaved_work: list[float] = []
        written = {v for updates in lowered.moving.values() for v in updates}
        self.moving_variables = {v: lowered.variables[v] for v in sorted(written)}

    def step(self, session: Any, step: int, traced: bool, kept: bool = False) -> float:
        """One ``sess.run``; returns its wall time in seconds. A run ``traced`` is recorded
        op by op; one only ``kept``, as a step of the trace (its times and loss)."""
        tf, lowered = self.tf, self.lowered
        fetches = {
            "train": lowered.fetches["main"],
            "losses": lowered.losses,
            "reads": lowered.read_versions,
            "writes": lowered.write_versions,
            "moving": lowered.moving,
        }
        out, metadata, started, ended = run_once(
            tf, session, fetches, self.feeder.feeds(step), traced, f"step {step}"
        )
        if self.moving_variables:  # after the step: what its racing updates left
            after = session.run(self.moving_variables)
            self.moving.append({"updates": out["moving"], "values": after})
        loss = float(np.mean([out["losses"][t] for t in sorted(out["losses"])]))
        self.losses.append(loss)
        if traced:
            self._record(step, started, ended, loss, metadata, out)
        elif kept:
            self._step(step, started, ended, loss)
        return ended - started

    def interleave(
        self, session: Any, first: int, variants: Sequence[Variant], rounds: int
    ) -> list[tuple[str, list[float]]]:
        """``rounds`` rounds from step ``first``: in each, the scenario's configuration and
        each variant run one untraced step of the same draws, in turns whose order reverses
        every other round. Seconds per round, per configuration."""
        if not variants:
            return []
        configurations: list[tuple[str, Mapping[str, float] | None]] = [("scenario", None)]
        configurations += [(v.name, v.speeds) for v in variants]
        times: dict[str, list[float]] = {name: [] for name, _ in configurations}
        fetches = self.lowered.fetches["main"]
        started_at = time.perf_counter()
        for index in range(rounds):
            if index >= MIN_ROUNDS and time.perf_counter() - started_at > ROUNDS_SECONDS:
                break  # long steps (many towers): fewer rounds, a wider interval
            order = configurations if index % 2 == 0 else configurations[::-1]
            for name, speeds in order:
                feeds = self.feeder.feeds(first + index, speeds, keep=False)
                if speeds is None:
                    rows = sum(feeds[self.lowered.work_rows[n]] for n in self.feeder.work_rows)
                    self.interleaved_work.append(rows * self.feeder.seconds_per_row)
                _, _, started, ended = run_once(
                    self.tf, session, fetches, feeds, False, f"interleaved step {first + index}"
                )
                times[name].append(ended - started)
        return list(times.items())

    def _step(self, step: int, started: float, ended: float, loss: float) -> float:
        """The step's record in the trace (seconds from the first one's start); returns
        that start's clock time."""
        if self.base is None:
            self.base = started
        self.trace.steps.append(
            StepRecord("main", step, started - self.base, ended - self.base, loss)
        )
        return self.base

    def _record(
        self,
        step: int,
        started: float,
        ended: float,
        loss: float,
        metadata: Any,
        out: dict[str, Any],
    ) -> None:
        base = self._step(step, started, ended, loss)
        tower_losses = {f"tower_{t}/loss": float(v) for t, v in out["losses"].items()}
        records, transfers = traced_step(
            metadata.step_stats, self.graph, step, base, self.census, tower_losses
        )
        self.trace.ops.extend(records)
        self.trace.transfers.extend(transfers)
        record_accesses(self.trace, out, "main", step, {r.op: r for r in records})
