"""Cross-check of asynchronous training: the race cannot be predicted, but it can be checked.

Which worker's update lands first depends on the machine's timing, so TensorFlow's parameters
cannot equal the simulator's. What must hold instead:

1. **Structure.** Every happens-before relation of a worker's run, in every traced run.
2. **Replay.** TensorFlow's own ledger (which version each update read, in which order they
   landed, which were dropped), replayed through the numpy numerics, gives TensorFlow's final
   parameters to float tolerance. Then the ledger is the whole truth of what happened. This
   holds for a locked apply; a lock-free one's reads may see half an update, and its replay
   is reported but not required to agree.
3. **Staleness.** The distribution of staleness, simulated against measured: mean, max,
   histogram, and the total variation distance between the histograms.
4. **Throughput.** Updates per second, predicted against measured on the untraced timed runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simsync.crosscheck.compare import (
    VALUE_TOLERANCE,
    CrossCheck,
    costs_kind,
    costs_label,
    predicted_scenario,
    relative_error,
    structure,
)
from simsync.crosscheck.evidence import staleness
from simsync.crosscheck.report import (
    AsyncReport,
    ReplayValues,
    StalenessComparison,
    ThroughputComparison,
)
from simsync.errors import SimsyncError
from simsync.ir import Graph
from simsync.replay import replay
from simsync.scenario import Scenario
from simsync.scenario.profile import Profile
from simsync.simulation import simulate
from simsync.tf_backend import TensorFlowRun, run_on_tensorflow
from simsync.trace import (
    Trace,
    histogram_distance,
    staleness_by_client,
    staleness_stats,
    stalest_client,
    throughput,
)

__all__ = ["crosscheck_async"]


def crosscheck_async(
    scenario: Scenario,
    graph: Graph,
    *,
    profile: Profile | None = None,
    warmup: int = 2,
    on_progress: Callable[[str], None] | None = None,
) -> CrossCheck:
    """Run the workers' threads on TensorFlow and the same number of updates in the simulator,
    and compare them (see the module's text); ``graph`` is the scenario's, ``on_progress``
    hears how far TensorFlow is."""
    # the work is sized at this machine's speed now
    real = run_on_tensorflow(scenario, warmup=warmup, graph=graph, on_progress=on_progress)
    predicted = predicted_scenario(scenario, profile, real)
    per_worker = max(len(real.trace.updates) // scenario.towers, 1)
    simulation = simulate(predicted.with_run(steps=per_worker))
    traced = [run for run, phase in real.phases.items() if phase == "traced"]
    timed = {run for run, phase in real.phases.items() if phase == "timed"}
    stale = _staleness(simulation.trace, real.trace)
    report: AsyncReport = {
        "check": "racing_clients",
        "scenario": scenario.name,
        "mode": simulation.graph.facts.mode,
        "steps": scenario.run.steps,
        "warmup": warmup,
        "workers": scenario.towers,
        "updates": len(real.trace.updates),
        "devices": real.devices.describe(),
        "tensorflow": real.tensorflow,
        "costs": costs_label(profile),
        "costs_kind": costs_kind(profile),
        "structure": {**structure(simulation.graph, real.trace, traced), "runs": len(traced)},
        "values": _replayed(scenario, simulation.graph, real),
        "staleness": stale,
        "throughput": _throughput(simulation.trace, real.trace, timed),
        "evidence": {"staleness": staleness(real.trace, stale["predicted"]["mean"])},
        "unmapped_tensorflow_ops": dict(real.census.unmapped),
    }
    return CrossCheck(scenario, predicted, simulation, real, report)


#: Why a lock-free run's ledger cannot be replayed exactly.
LOCK_FREE = (
    "lock-free: a read may see part of an update and two applies may interleave, so "
    "the ledger does not pin down what each read saw; the replay can only come close"
)


def _replayed(scenario: Scenario, graph: Graph, real: TensorFlowRun) -> ReplayValues:
    """Replay the real ledger. Exact agreement is required of a locked apply only."""
    exact = all(op.locks for op in graph.ops() if op.writes)  # every apply under its lock
    note = None if exact else LOCK_FREE
    try:
        params = replay(graph, real.trace, scenario.model, scenario.run.seed).params
    except SimsyncError as error:  # e.g. lock-free: two applies found the same version
        return {
            "exact": exact,
            "tolerance": VALUE_TOLERANCE,
            "note": note,
            "why": str(error),
            "replayed": False,
            "max_abs_diff": None,
            "ok": not exact,
        }
    diff = max(float(np.max(np.abs(params[name] - value))) for name, value in real.params.items())
    return {
        "exact": exact,
        "tolerance": VALUE_TOLERANCE,
        "note": note,
        "why": None,
        "replayed": True,
        "max_abs_diff": diff,
        "ok": diff <= VALUE_TOLERANCE or not exact,
    }


def _staleness(simulated: Trace, real: Trace) -> StalenessComparison:
    predicted, measured = staleness_stats(simulated), staleness_stats(real)
    by_worker = {"predicted": staleness_by_client(simulated), "measured": staleness_by_client(real)}
    return {
        "predicted": predicted,
        "measured": measured,
        "distance": histogram_distance(predicted["histogram"], measured["histogram"]),
        "mean_error": predicted["mean"] - measured["mean"],
        "by_worker": by_worker,
        "stalest": {side: stalest_client(rows) for side, rows in by_worker.items()},
    }


def _throughput(simulated: Trace, real: Trace, timed: set[tuple[str, int]]) -> ThroughputComparison:
    """Updates per second over the same phase on both sides: the real timed runs are the last
    ones taken from the pool, so the prediction counts the simulation's last runs as many."""
    measured = throughput(real, timed) if timed else throughput(real)
    last = sorted(simulated.steps, key=lambda s: s.start)[-len(timed) :] if timed else []
    predicted = throughput(simulated, {(s.client, s.step) for s in last} or None)
    return {
        "predicted": predicted,
        "measured": measured,
        "error": relative_error(predicted, measured),
        "timed_runs": len(timed),
    }
