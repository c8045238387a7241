"""A scenario prepared for a TensorFlow session, and what every client loop shares.

:func:`prepare` builds (unless given) and lowers the graph and plans its devices; a
:class:`Feeder` makes one client's feeds step by step (the simulator's own batches and draws);
:func:`run_once` is one ``sess.run``; :func:`record_accesses` puts a run's variable accesses in
the trace; :class:`TensorFlowRun` is what a run gives back. The one-client loop
(:mod:`~simsync.tf_backend.session.execute`) and the racing threads
(:mod:`~simsync.tf_backend.session.asynchronous`) both build on this module.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simsync.draws import DrawStreams
from simsync.ir import Cost, Graph, run_order
from simsync.kinds.dequeue import batch_positions
from simsync.numerics import make_batches
from simsync.patterns import build, tower_device
from simsync.scenario import Scenario
from simsync.tf_backend.session.gpus import gpu_memory_error
from simsync.tf_backend.session.lower import Lowered, lower
from simsync.tf_backend.session.runtime import (
    BackendError,
    DevicePlan,
    load_tensorflow,
    plan_devices,
    session_config,
)
from simsync.tf_backend.session.tracing import NodeCensus
from simsync.tf_backend.session.work import measure_seconds_per_row, rows_for
from simsync.trace import OpRecord, Trace, VariableAccess

__all__ = ["Feeder", "Setup", "TensorFlowRun", "prepare", "record_accesses", "run_once"]


@dataclass
class TensorFlowRun:
    """What a TensorFlow run produced: its trace (traced steps only), every step's loss, the
    final parameters, and how the run was set up."""

    trace: Trace
    losses: list[float]
    params: dict[str, np.ndarray]
    devices: DevicePlan
    tensorflow: str
    seconds_per_row: float
    warmup: int
    census: NodeCensus = field(default_factory=NodeCensus)
    work_rows: dict[str, list[int]] = field(default_factory=dict)  # IR op -> rows per step
    timed: list[tuple[int, float]] = field(default_factory=list)  # (step, seconds) untraced
    #: async: each run's phase, (client, step) -> "warmup", "traced", "untraced" or "timed"
    phases: dict[tuple[str, int], str] = field(default_factory=dict)
    #: final values of the variables that hold numbers but are not trained (moving statistics)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    #: per step, what each moving-average update read and averaged in, and the values after
    moving: list[dict[str, Any]] = field(default_factory=list)
    #: interleaved rounds: configuration ("scenario" or a variant's name) -> seconds per round
    interleaved: dict[str, list[float]] = field(default_factory=dict)
    #: the seconds of compute each interleaved round's scenario step was sized for
    interleaved_work: list[float] = field(default_factory=list)

    @property
    def total_steps(self) -> int:
        return len(self.losses)


@dataclass
class Setup:
    """A scenario lowered to TensorFlow, with its devices and session config."""

    scenario: Scenario
    tf: Any
    graph: Graph
    plan: DevicePlan
    lowered: Lowered
    config: Any
    seconds_per_row: float


def prepare(
    scenario: Scenario, seconds_per_row: float | None = None, graph: Graph | None = None
) -> Setup:
    """Build (unless given) and lower the scenario's graph; measure the work's speed if not
    given."""
    tf = load_tensorflow()
    graph = build(scenario) if graph is None else graph
    plan = plan_devices(list(graph.devices), scenario.towers)
    lowered = lower(graph, scenario.model, scenario.run.seed, plan)
    config = session_config(plan)
    if seconds_per_row is None:
        # measured for every run: this machine's speed drifts by several per cent in minutes
        seconds_per_row = measure_seconds_per_row(tf, config, plan.mapping[tower_device(0)])
    return Setup(scenario, tf, graph, plan, lowered, config, seconds_per_row)


def run_once(
    tf: Any, session: Any, fetches: Any, feeds: dict[Any, Any], traced: bool, where: str
) -> tuple[Any, Any, float, float]:
    """One ``sess.run``, with ``FULL_TRACE`` if ``traced``: its results, its metadata (None
    untraced), and its wall-clock start and end. A TensorFlow error becomes one line."""
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    started = time.time()
    try:
        out = session.run(
            fetches,
            feeds,
            options=options if traced else None,
            run_metadata=metadata if traced else None,
        )
    except (tf.errors.OpError, TypeError, ValueError) as error:
        message = str(error).strip().splitlines()[0]
        if gpu_memory_error(message):
            raise BackendError(f"TensorFlow ran out of GPU memory at {where}: {message}") from None
        raise BackendError(f"TensorFlow failed at {where}: {message}") from None
    return out, metadata if traced else None, started, time.time()


def record_accesses(
    trace: Trace,
    out: dict[str, Any],
    client: str,
    step: int,
    spans: dict[str, OpRecord],
    default: float = 0.0,
    kept: dict[str, Any] | None = None,
) -> None:
    """The variable accesses of one run from its fetched counters: a read sees ``version``
    when its op starts; an apply, which fetched the version *before* it, makes the next one
    when its op ends (unless it was dropped). ``default`` is the time of an untraced op."""
    for kind, write in (("reads", False), ("writes", True)):
        for op_name, versions in out[kind].items():
            record = spans.get(op_name)
            time_at = (record.end if write else record.start) if record else default
            bump = int(write and bool((kept or {}).get(op_name, True)))
            for variable, version in versions.items():
                trace.accesses.append(
                    VariableAccess(
                        variable, op_name, client, step, time_at, int(version) + bump, write
                    )
                )


class Feeder:
    """What one client feeds each step: its towers' batches (the simulator's own, keyed by
    client, step and tower) and its work sizes (from the simulator's own draws)."""

    def __init__(
        self,
        scenario: Scenario,
        graph: Graph,
        lowered: Lowered,
        seconds_per_row: float,
        client: int = 0,
    ) -> None:
        self.scenario, self.graph, self.lowered = scenario, graph, lowered
        self.seconds_per_row, self.client = seconds_per_row, client
        #: the ops of one run of this client, in order
        self.ops = ops = [
            graph.op(name) for name in run_order(graph, graph.clients[client].fetches)
        ]
        self.groups: dict[str, Cost] = {
            op.cost.group: op.cost for op in ops if op.cost.group is not None
        }
        self.draws = DrawStreams(scenario.run.seed, client, self.groups)
        #: each tower's position among the run's batches, drawn together as the replay does
        self.positions = batch_positions(ops)
        self.batches = {t: xy for t, xy in lowered.batches.items() if t in self.positions}
        names = {op.name for op in ops}
        self.work_rows: dict[str, list[int]] = {
            name: [] for name in lowered.work_rows if name in names
        }

    def feeds(
        self, step: int, speeds: Mapping[str, float] | None = None, *, keep: bool = True
    ) -> dict[Any, Any]:
        """The step's feeds, the devices in ``speeds`` at those speeds; the work sizes are
        kept in ``work_rows`` unless ``keep`` is false (an interleaved step)."""
        spec, seed = self.scenario.model, self.scenario.run.seed
        feeds: dict[Any, Any] = {}
        batches = make_batches(spec, seed, self.client, step, len(self.positions))
        for tower, (x, y) in self.batches.items():
            batch = batches[self.positions[tower]]
            feeds[x], feeds[y] = batch.x, batch.y
        draws = self.draws.step(step)
        for name in self.work_rows:
            rows = self.lowered.work_rows[name]
            op = self.graph.op(name)
            speed = (speeds or {}).get(op.device, self.graph.devices[op.device].speed)
            assert op.cost.group is not None
            seconds = draws[op.cost.group] * op.cost.fraction / speed
            feeds[rows] = rows_for(seconds, self.seconds_per_row)
            if keep:
                self.work_rows[name].append(feeds[rows])
        return feeds
