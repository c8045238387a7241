"""Cross-check: run a scenario in the simulator and in TensorFlow, and compare the two traces.

1. **Structure.** Every happens-before relation the IR implies, checked on the real trace: for
   every tensor ``a -> b`` and every traced step, ``b`` starts only after ``a`` has ended (so
   each sync point starts only after all its inputs ended).
2. **Values.** The parameters and the loss after every step, numpy against TensorFlow.
3. **Timing.** The predicted step time against the measured one, over untraced steps (a
   trace costs time of its own): means, and medians with the 95 % interval of the measured
   one; per-kind op durations from the traced steps, as relative errors. The prediction is
   for this machine: it uses this machine's cached profile (measured once, see
   :mod:`simsync.tf_backend.profile.machine`), or a calibration profile given instead, or, asked
   for, the scenario's own costs with the host's cores.
4. **Evidence** (:mod:`simsync.crosscheck.evidence`): whether the towers ran side by side,
   who arrived last at each sync point, and what a configuration changes, measured in
   interleaved rounds, each with a verdict only when it is stronger than the machine's noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simsync.crosscheck.evidence import (
    INCONCLUSIVE,
    arrivals,
    drifted,
    interleaved_ratio,
    median_interval,
    side_by_side,
    step_by_step,
    with_prediction,
)
from simsync.crosscheck.moving import moving_statistics
from simsync.crosscheck.refit import probes, refit
from simsync.crosscheck.report import (
    CostsKind,
    Evidence,
    MachineCheck,
    MachineMeasure,
    OpTiming,
    Ratio,
    Report,
    Structure,
    SyncReport,
    Timing,
    Values,
    Violation,
)
from simsync.findings import NO_SLOW_TOWER
from simsync.ir import Graph, run_order
from simsync.patterns import tower_device
from simsync.scenario import Scenario
from simsync.scenario.profile import Profile, apply_profile
from simsync.simulation import Simulation, median_step_time, simulate
from simsync.tf_backend import TensorFlowRun, run_on_tensorflow
from simsync.tf_backend.session.execute import Variant
from simsync.trace import Trace

__all__ = ["MACHINE", "CrossCheck", "crosscheck_one_client", "happens_before"]

#: ``profile=MACHINE``: predict with this machine's cached profile (the default).
MACHINE = "machine"
#: Interleaved rounds of the scenario against each variant (a round: one step of each).
ROUNDS = 24
#: Steps the simulator runs to predict a variant's step time.
PREDICTION_STEPS = 200

#: Parameters computed in float64 by numpy and by TensorFlow agree to about 1e-15; a real
#: mismatch (a missed update, another batch) is many orders larger.
VALUE_TOLERANCE = 1e-9


@dataclass
class CrossCheck:
    """Both runs and the report comparing them."""

    scenario: Scenario
    predicted_scenario: Scenario
    simulation: Simulation
    real: TensorFlowRun | Any  # a cluster run for SyncReplicasOptimizer
    report: Report


def crosscheck_one_client(
    scenario: Scenario,
    graph: Graph,
    *,
    profile: Profile | None,
    warmup: int = 2,
    on_progress: Callable[[str], None] | None = None,
) -> CrossCheck:
    """The checks of a graph with one client (towers, batch norm): run ``warmup + [run]
    steps`` steps on TensorFlow and in the simulator and compare them. ``graph`` is the
    scenario's; ``profile`` a resolved one (:func:`resolve_profile`), or None for the
    scenario's own costs."""
    variants = _variants(scenario)
    # what drifts, measured again in this session, when the profile is this machine's
    extra = probes(scenario, profile) if variants and costs_kind(profile) == "machine" else []
    # The work is sized at this machine's speed now (measured for this run), so the
    # profile's compute scale holds though the machine's speed drifts between runs.
    real = run_on_tensorflow(
        scenario,
        warmup=warmup,
        graph=graph,
        variants=[variant for variant, _ in variants] + extra,
        rounds=ROUNDS,
        on_progress=on_progress,
    )
    cached = predicted_scenario(scenario, profile, real)
    fitted = refit(profile, scenario, real, variants[0][0]) if extra and profile else None
    predicted = cached if fitted is None else predicted_scenario(scenario, fitted[0], real)
    simulation = simulate(predicted.with_run(steps=real.total_steps))
    traced = {s.step for s in real.trace.steps}
    report: SyncReport = {
        "check": "one_client",
        "scenario": scenario.name,
        "steps": scenario.run.steps,
        "warmup": warmup,
        "devices": real.devices.describe(),
        "tensorflow": real.tensorflow,
        "costs": costs_label(profile),
        "costs_kind": costs_kind(profile),
        "structure": structure(simulation.graph, real.trace),
        "values": _values(simulation, real),
        "timing": _timing(simulation.trace, real, traced, _stand_ins(scenario, profile)),
        "evidence": _evidence(
            graph,
            real,
            cached,
            variants,
            costs_kind(profile) == "machine",
            None if fitted is None else predicted,
        ),
        "unmapped_tensorflow_ops": dict(real.census.unmapped),
    }
    machine = report["evidence"]["machine"]
    if fitted is not None and machine is not None:  # what the profile as cached predicted
        measured = report["timing"]["measured_median_step_time"]
        as_cached = machine["scenario"]["predicted"]  # the machine check simulated it
        report["refit"] = {
            **fitted[1],
            "cached_predicted_median_step_time": as_cached,
            "cached_error_median": relative_error(as_cached, measured),
        }
    return CrossCheck(scenario, predicted, simulation, real, report)


def resolve_profile(
    profile: Profile | str | None, on_progress: Callable[[str], None] | None = None
) -> Profile | None:
    """The profile to predict with: :data:`MACHINE` becomes this machine's cached one."""
    if profile == MACHINE:
        from simsync.simulation.calibrate import machine_profile

        return machine_profile(on_progress=on_progress)
    assert profile is None or isinstance(profile, Profile)
    return profile


def costs_kind(profile: Profile | None) -> CostsKind:
    """Where the predicted costs come from: ``scenario`` (its own costs), ``machine`` (this
    machine's measured profile) or ``file`` (a calibration profile from a file)."""
    if profile is None:
        return "scenario"
    return "machine" if profile.calibrated_on.get("machine") else "file"


def costs_label(profile: Profile | None) -> str:
    """Where the predicted costs come from, in words, for a report."""
    kind = costs_kind(profile)
    if profile is None or kind == "scenario":
        return "scenario"
    if kind == "machine":
        return f"this machine's profile (measured {profile.calibrated_on.get('measured', '')})"
    return f"calibration profile {profile.source}".strip()


#: A variant of the scenario, and the hypotheses about its ratio, each a change of the
#: predicted scenario whose simulated ratio is that hypothesis' prediction.
Hypotheses = dict[str, Callable[[Scenario], Scenario]]


def _variants(scenario: Scenario) -> list[tuple[Variant, Hypotheses]]:
    """What the interleaved rounds compare the scenario with, following from its graph:
    several towers against one tower working alone; unequal speeds against all at the
    fastest."""
    speeds = scenario.cluster.speeds
    found: list[tuple[Variant, Hypotheses]] = []
    if scenario.towers > 1:
        found.append(
            (
                Variant.one_tower_working(scenario.towers),
                {
                    "as long as side by side": lambda s: s,
                    "as long as one after another": _one_op_at_a_time,
                },
            )
        )
    if len(set(speeds)) > 1:
        fastest = {tower_device(t): max(speeds) for t in range(scenario.towers)}
        found.append(
            (
                Variant(NO_SLOW_TOWER, fastest),
                {"waits for the slowest": lambda s: s, "does not wait": _never_waits},
            )
        )
    return found


def _one_op_at_a_time(scenario: Scenario) -> Scenario:
    """Towers that take turns: on one core, or on virtual GPUs of a GPU that run one at a
    time."""
    cluster = dataclasses.replace(
        scenario.cluster, host_cores=1, core_efficiency=1.0, gpu_contention=1.0
    )
    return dataclasses.replace(scenario, cluster=cluster)


def _never_waits(scenario: Scenario) -> Scenario:
    """If nothing waited for the slow tower, a step would last as long as without it."""
    speeds = (max(scenario.cluster.speeds),) * scenario.towers
    return dataclasses.replace(
        scenario, cluster=dataclasses.replace(scenario.cluster, speeds=speeds)
    )


def _evidence(
    graph: Graph,
    real: TensorFlowRun,
    predicted: Scenario,
    variants: list[tuple[Variant, Hypotheses]],
    for_this_machine: bool,
    refitted: Scenario | None = None,
) -> Evidence:
    """What the real run shows (see :mod:`simsync.crosscheck.evidence`), and, when the
    predictions are for this machine (its measured profile), whether it still runs a variant
    as fast as its profile says (its load may have changed since it was measured). When it
    does not, the hypotheses come from ``refitted`` (the profile with what drifts measured in
    this session, :mod:`simsync.crosscheck.refit`), or there is no verdict without one."""
    step_time = _StepTimes()
    check = variants and for_this_machine
    machine = _machine_check(real, predicted, variants[0][0], step_time) if check else None
    drift = bool(machine and machine["drifted"])
    base = refitted if drift and refitted is not None else predicted
    ratios: list[Ratio] = []
    for variant, hypotheses in variants:
        expected = {}
        for name, change in hypotheses.items():
            changed = change(base)
            mine, theirs = step_time(changed), step_time(variant.apply(changed))
            expected[name] = mine / theirs if theirs > 0 else math.inf
        ratios.append(interleaved_ratio(real.interleaved, variant.name, expected))
    if drift and refitted is None:  # predictions from an out-of-date profile: no yardstick
        ratios = [_out_of_date(ratio) for ratio in ratios]
    longer = _simulated_lasts(base)
    simulated = {a["sync_point"]: a for a in arrivals(longer.graph, longer.trace)}
    found_arrivals = []
    for found in arrivals(graph, real.trace):
        point = found["sync_point"]
        found = with_prediction(found, simulated.get(point))
        by_step = step_by_step(graph, real.trace, longer.trace, point)
        found_arrivals.append(found if by_step is None else {**found, "step_by_step": by_step})
    return {
        "side_by_side": side_by_side(graph, real.trace),
        "arrivals": found_arrivals,
        "ratios": ratios,
        "machine": machine,
    }


#: Steps the prediction of who comes last simulates: with fewer cores than towers the
#: threads' order changes from step to step, and a share needs more steps than a run traces.
LAST_STEPS = 400


def _simulated_lasts(scenario: Scenario) -> Simulation:
    """:data:`LAST_STEPS` simulated steps of ``scenario`` (timing only), for who came last
    at each sync point: their tally, and step by step the steps the real run traced (the
    same draws)."""
    return simulate(scenario.with_run(steps=max(LAST_STEPS, scenario.run.steps)), numerics=False)


def _out_of_date(ratio: Ratio) -> Ratio:
    """A ratio whose predictions came from an out-of-date profile: no verdict."""
    return {**ratio, "verdict": INCONCLUSIVE, "out_of_date": True}


def _machine_check(
    real: TensorFlowRun, predicted: Scenario, variant: Variant, step_time: _StepTimes
) -> MachineCheck:
    """The variant's measured step time against its prediction, and the scenario's own:
    whether this machine still runs as its profile says (both off, the same way)."""

    def measure(name: str, scenario: Scenario) -> MachineMeasure:
        theirs = step_time(scenario)
        measured, low, high = median_interval(real.interleaved[name])
        return {
            "variant": name,
            "predicted": theirs,
            "measured": measured,
            "interval": [low, high],
            "error": relative_error(theirs, measured),
        }

    machine = measure(variant.name, variant.apply(predicted))
    own = measure("scenario", predicted)
    return {**machine, "drifted": drifted(machine, own), "scenario": own}


class _StepTimes:
    """The simulated median step time of a scenario, simulated once per distinct scenario
    (the hypotheses and the machine check ask for the same ones again)."""

    def __init__(self) -> None:
        self.known: dict[str, float] = {}

    def __call__(self, scenario: Scenario) -> float:
        key = repr(scenario)
        if key not in self.known:
            self.known[key] = median_step_time(scenario, PREDICTION_STEPS)
        return self.known[key]


def predicted_scenario(
    scenario: Scenario, profile: Profile | None, real: TensorFlowRun
) -> Scenario:
    """The scenario the prediction simulates: with the profile's costs, or with the host's
    shared cores when TensorFlow ran on logical CPU devices, or the GPUs its towers went
    round."""
    if profile is not None:
        return apply_profile(scenario, profile)
    plan = real.devices
    if plan.host_cores is None and plan.split is None:
        return scenario
    gpus = None if plan.split is None else plan.split.physical
    cluster = dataclasses.replace(scenario.cluster, host_cores=plan.host_cores, gpus=gpus)
    return dataclasses.replace(scenario, cluster=cluster)


def happens_before(
    graph: Graph,
    trace: Trace,
    runs: Iterable[tuple[str, int]] | None = None,
    among: set[str] | None = None,
) -> tuple[int, list[Violation]]:
    """Check every IR edge of a client's run in every traced run of ``trace`` (``runs``, or
    every step record's): how many were checked, and violations. An op of the run absent from
    the trace is a violation too (it did not run, or its TensorFlow ops could not be mapped).
    ``among`` limits the check to the edges between those ops (and only they must be there)."""
    spans = {(r.client, r.step, r.op): r for r in trace.ops}
    violations: list[Violation] = []
    ops = {
        c.name: {n for n in run_order(graph, c.fetches) if among is None or n in among}
        for c in graph.clients
    }
    checked = 0
    for client, step in sorted(
        runs if runs is not None else {(s.client, s.step) for s in trace.steps}
    ):
        missing = [op for op in ops[client] if (client, step, op) not in spans]
        violations += [{"step": step, "client": client, "missing": op} for op in missing]
        for src, dst in dict.fromkeys(graph.nx.subgraph(ops[client]).edges()):
            before, after = spans.get((client, step, src)), spans.get((client, step, dst))
            if before is None or after is None:
                continue
            checked += 1
            if after.start < before.outputs_at:  # what TensorFlow guarantees
                violations.append(
                    {
                        "step": step,
                        "client": client,
                        "before": src,
                        "after": dst,
                        "overlap_seconds": before.outputs_at - after.start,
                    }
                )
    return checked, violations


def structure(
    graph: Graph,
    trace: Trace,
    runs: Iterable[tuple[str, int]] | None = None,
    among: set[str] | None = None,
) -> Structure:
    """The structure section of a report: happens-before relations checked and violated."""
    checked, violations = happens_before(graph, trace, runs, among)
    return {"checked": checked, "violations": violations, "ok": not violations}


def _values(simulation: Simulation, real: TensorFlowRun) -> Values:
    """Parameters and losses must be equal; moving statistics equal, or where updates race,
    each step's outcome one the simulator allows (:mod:`simsync.crosscheck.moving`)."""
    simulated = simulation.trace.params
    abs_diff = max(float(np.max(np.abs(simulated[n] - v))) for n, v in real.params.items())
    rel_diff = max(
        float(np.max(np.abs(simulated[n] - v) / np.maximum(np.abs(v), 1e-300)))
        for n, v in real.params.items()
    )
    losses = np.array([s.loss for s in simulation.trace.steps], dtype=float)
    loss_diff = float(np.max(np.abs(losses - np.array(real.losses))))
    moving = moving_statistics(simulation, real)
    report: Values = {
        "compared": ["losses", *sorted(real.params), *(moving["compared"] if moving else [])],
        "max_abs_diff": abs_diff,
        "max_rel_diff": rel_diff,
        "loss_max_abs_diff": loss_diff,
        "tolerance": VALUE_TOLERANCE,
        "ok": abs_diff <= VALUE_TOLERANCE
        and loss_diff <= VALUE_TOLERANCE
        and (moving is None or moving["ok"]),
    }
    if moving:
        report["moving_statistics"] = moving
    return report


def _stand_ins(scenario: Scenario, profile: Profile | None) -> set[str]:
    """The op kinds whose predicted cost is the scenario's own (its ``[costs]``), which the
    profile did not measure on this machine: a lesson's stand-in (lesson 7's moving-average
    update at 0.5 ms), not what TensorFlow's op costs here.

    >>> from simsync.scenario import Scenario
    >>> sorted(_stand_ins(Scenario("s", costs={"moving_average": 5e-4, "apply": 1e-4}),
    ...                   Profile({"apply": 2e-4}, 1.0, 0.0, 5e-4, 30.0, 2)))
    ['moving_average']
    """
    if profile is None:
        return set()
    return set(scenario.costs) - set(profile.costs)


def _timing(
    simulated: Trace,
    real: TensorFlowRun,
    traced: set[int],
    stand_ins: Collection[str] = (),
) -> Timing:
    """Mean step times of the untraced timing steps and their error; also medians, which a
    machine's hiccups (a step suddenly twice as slow) do not move. Op times come from the
    traced steps (tracing included); a kind of ``stand_ins`` (:func:`_stand_ins`) is said to
    be."""
    timed = dict(real.timed) or {s.step: s.duration for s in real.trace.steps}
    predicted = [s.duration for s in simulated.steps if s.step in timed]
    measured = list(timed.values())
    kinds: dict[str, OpTiming] = {}
    for kind, (p, m) in _kind_durations(simulated, real.trace, traced).items():
        kinds[kind] = {
            "predicted": p,
            "measured": m,
            "error": relative_error(p, m),
            "timed_by": real.census.timing_source(kind),
            "stand_in": kind in stand_ins,
        }
    mean_p, mean_m = float(np.mean(predicted)), float(np.mean(measured))
    median_p = float(np.median(predicted))
    median_m, low, high = median_interval(measured)
    return {
        "predicted_step_time": mean_p,
        "measured_step_time": mean_m,
        "error": relative_error(mean_p, mean_m),
        "predicted_median_step_time": median_p,
        "measured_median_step_time": median_m,
        "measured_interval": [low, high],
        "error_median": relative_error(median_p, median_m),
        "timed_steps": len(measured),
        "ops": kinds,
    }


def _kind_durations(
    simulated: Trace, real: Trace, traced: set[int]
) -> dict[str, tuple[float, float]]:
    sums: dict[str, list[list[float]]] = defaultdict(lambda: [[], []])
    for side, trace in enumerate((simulated, real)):
        for record in trace.ops:
            if record.step in traced:
                sums[record.kind][side].append(record.end - record.start)
    return {
        kind: (float(np.mean(p)), float(np.mean(m)))
        for kind, (p, m) in sorted(sums.items())
        if p and m
    }


def relative_error(predicted: float, measured: float) -> float | None:
    """Relative error of the prediction (+ too slow, - too fast); None when nothing was measured.

    >>> relative_error(1.05, 1.0), relative_error(0.0, 0.0)
    (0.050000000000000044, None)
    """
    return (predicted - measured) / measured if measured > 0 else None
