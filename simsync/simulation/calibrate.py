"""Calibration: measure what ops cost here, on a configuration that is not the one predicted.

``calibrate(scenario)`` runs a *one-tower* version of the scenario in TensorFlow (same model,
same aggregation, same compute distribution) and reads off its real trace:

1. fixed-cost op kinds (read, dequeue, aggregate, apply, allreduce): the median duration;
2. compute: after the traced steps, untraced steps with the scenario's work and without it
   alternate in the same session (interleaved: the machine's drift hits both); ``compute_scale``
   is the median, round by round, of their difference over the seconds the work was sized
   for;
3. ``session_run``: the median untraced step without work, less what the simulator gives that
   step from the measured op costs alone: what ``sess.run`` costs beyond its ops (feeding,
   fetching, starting the executors);
4. ``latency_us``: the median gap between an op's end and the start of a consumer on another
   device;
5. ``host_cores``: the cores the session lets ops share (its inter-op threads), and
   ``core_efficiency``: one tower per core all working against one tower working alone, in
   interleaved rounds; the efficiency is the one with which the simulator gives their
   measured ratio;
6. on GPUs: ``gpus``, the physical GPUs here; ``gpu_contention``, in the same way from
   towers on the virtual GPUs of each GPU all working against one alone (when this process
   splits its GPUs); ``bandwidth_gbps``, the bandwidth of a copy from the host to a GPU.

A profile measured on one tower then predicts two, four, eight, with stragglers or without:
the cross-check tells how well.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from simsync.ir import Graph
from simsync.patterns import build, tower_device
from simsync.scenario import LinkConfig, Scenario
from simsync.scenario.profile import Profile, apply_profile, save_profile
from simsync.scenario.schema import COST_KINDS, MAX_SPEED
from simsync.simulation import median_step_time, simulate
from simsync.tf_backend.profile.machine import (
    REFERENCE,
    cached_profile,
    kept,
    machine_key,
    profile_path,
)
from simsync.tf_backend.session.execute import Variant, run_on_tensorflow
from simsync.tf_backend.session.prepare import TensorFlowRun
from simsync.tf_backend.session.runtime import DevicePlan, gpu_names
from simsync.trace import OpRecord

__all__ = ["STEPS", "calibrate", "machine_profile", "one_tower", "solve"]


def one_tower(scenario: Scenario) -> Scenario:
    """The calibration configuration: the scenario on a single device at speed 1."""
    cluster = dataclasses.replace(scenario.cluster, devices=1, speeds=(1.0,))
    return dataclasses.replace(scenario, cluster=cluster, name=f"{scenario.name} (1 tower)")


#: Traced steps of a calibration (and rounds: twice as many), unless told otherwise.
STEPS = 20


def machine_profile(
    *, refresh: bool = False, on_progress: Callable[[str], None] | None = None
) -> Profile:
    """This machine's profile: the cached one, or measured now (a few seconds) and cached.

    ``refresh`` measures it again even if a cached one exists. ``on_progress`` is told when a
    measurement starts (a spinner can say why the wait)."""
    key = machine_key()
    path = profile_path(key)

    def measure() -> Profile:
        return save_profile(calibrate(REFERENCE, machine=key), path)

    return kept(
        path,
        "this machine's profile",
        None if refresh else lambda: cached_profile(path, key),
        measure,
        f"measuring this machine once, a few seconds (kept in {path.parent})",
        on_progress,
    )


def calibrate(
    scenario: Scenario,
    *,
    steps: int = STEPS,
    warmup: int = 3,
    machine: dict[str, Any] | None = None,
) -> Profile:
    """Measure a :class:`Profile` for ``scenario``'s model on this machine. ``machine``: what
    the profile is valid for, when it is this machine's cached one
    (:func:`simsync.tf_backend.profile.machine.machine_key`)."""
    probe = one_tower(scenario).with_run(steps=steps)
    idle = Variant("no work", {tower_device(0): MAX_SPEED})
    # the step times come from the interleaved rounds: no untraced timing steps
    run = run_on_tensorflow(probe, warmup=warmup, timing_steps=0, variants=[idle], rounds=2 * steps)
    graph = build(probe)
    records = run.trace.ops
    costs, latency = _fixed_costs(records), _latency(graph, records)
    split = run.devices.split
    profile = Profile(
        costs=costs,
        compute_scale=_compute_scale(run, idle),
        compute_overhead=0.0,
        session_run=_session_time(probe, run, idle, costs, latency),
        latency_us=latency * 1e6,
        host_cores=run.devices.host_cores or os.cpu_count() or 1,
        core_efficiency=1.0,
        gpus=None if split is None else split.physical,
        bandwidth_gbps=None if split is None else _bandwidth(run) * 8 / 1e9,
        devices=run.devices.kind,
        tensorflow=run.tensorflow,
        seconds_per_row=run.seconds_per_row,
        calibrated_on={
            "scenario": scenario.name,
            "source": scenario.source,
            "towers": 1,
            "steps": steps,
            "warmup": warmup,
            "measured": time.strftime("%Y-%m-%d %H:%M"),
            **({"device": ", ".join(gpu_names())} if split is not None else {}),
            **({"machine": machine} if machine is not None else {}),
        },
    )
    return _sharing(scenario, profile, run.devices, warmup, 2 * steps)


#: The most towers the probe of :func:`_sharing` runs: one per core up to this, or this many
#: virtual GPUs of each GPU at most.
EFFICIENCY_TOWERS = 8
VIRTUAL_TOWERS = 4


def _sharing(
    scenario: Scenario, profile: Profile, devices: DevicePlan, warmup: int, rounds: int
) -> Profile:
    """How much devices sharing one thing slow each other, as the simulator must model it:
    towers that share the host's cores (one per core, up to :data:`EFFICIENCY_TOWERS`), or the
    virtual GPUs of every GPU (up to :data:`VIRTUAL_TOWERS` on each), all working, against one
    tower working alone, in interleaved rounds. The profile's ``core_efficiency`` or
    ``gpu_contention`` is then the one with which the simulator, with the rest of the profile,
    gives the measured median ratio of the two (found by bisection: the ratio moves one way
    as it rises)."""
    split = devices.split
    if split is None:
        cores = profile.host_cores or 1
        towers, low, high = min(cores, EFFICIENCY_TOWERS), 0.05, 1.0

        def change(value: float) -> Profile:
            return dataclasses.replace(profile, core_efficiency=value)

    else:
        towers = split.physical * min(split.per_gpu, VIRTUAL_TOWERS)
        towers, low, high = min(towers, split.devices), 0.0, 1.0

        def change(value: float) -> Profile:
            return dataclasses.replace(profile, gpu_contention=value)

    if towers < 2 or (split is not None and split.per_gpu < 2):
        return profile
    cluster = dataclasses.replace(scenario.cluster, devices=towers, speeds=(1.0,) * towers)
    probe = dataclasses.replace(scenario, cluster=cluster).with_run(steps=2)
    alone = Variant.one_tower_working(towers)
    run = run_on_tensorflow(
        probe,
        warmup=warmup,
        timing_steps=0,
        seconds_per_row=profile.seconds_per_row,
        variants=[alone],
        rounds=rounds,
    )
    measured = statistics.median(
        all_ / one
        for all_, one in zip(run.interleaved["scenario"], run.interleaved[alone.name], strict=True)
    )

    def ratio(value: float) -> float:
        predicted = apply_profile(probe, change(value))
        return median_step_time(predicted, 50) / median_step_time(alone.apply(predicted), 50)

    return change(solve(ratio, measured, low, high))


def solve(ratio: Callable[[float], float], measured: float, low: float, high: float) -> float:
    """The value in ``[low, high]`` at which the monotone ``ratio`` gives ``measured`` (the
    nearer end when none does), by bisection, to 4 decimals.

    >>> solve(lambda x: 1 + 3 * x, 2.5, 0.0, 1.0), solve(lambda x: 2 - x, 5.0, 0.0, 1.0)
    (0.5, 0.0)
    """
    at_low, at_high = ratio(low), ratio(high)
    rising = at_high > at_low
    if (measured >= at_high) == rising:
        return high
    if (measured <= at_low) == rising:
        return low
    for _ in range(16):
        middle = (low + high) / 2
        low, high = (middle, high) if (ratio(middle) < measured) == rising else (low, middle)
    return round((low + high) / 2, 4)


def _bandwidth(run: TensorFlowRun) -> float:
    """Bytes per second of a copy from the host to the first tower's GPU."""
    from simsync.tf_backend.session.runtime import load_tensorflow, session_config
    from simsync.tf_backend.session.work import measure_bandwidth

    plan = run.devices
    return measure_bandwidth(load_tensorflow(), session_config(plan), plan.mapping["/gpu:0"])


def _fixed_costs(records: list[OpRecord]) -> dict[str, float]:
    durations: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if record.kind in COST_KINDS:
            durations[record.kind].append(record.end - record.start)
    return {kind: statistics.median(values) for kind, values in sorted(durations.items())}


def _compute_scale(run: TensorFlowRun, idle: Variant) -> float:
    """Real seconds of compute per nominal second: the untraced step with its work against
    the same step without, round by round (interleaved, so the machine's drift cancels)."""
    full, empty = run.interleaved["scenario"], run.interleaved[idle.name]
    scales = [
        (mine - theirs) / work
        for mine, theirs, work in zip(full, empty, run.interleaved_work, strict=True)
        if work > 0
    ]
    return min(max(statistics.median(scales), 1e-3), 1e3) if scales else 1.0


def _session_time(
    probe: Scenario,
    run: TensorFlowRun,
    idle: Variant,
    costs: dict[str, float],
    latency: float,
) -> float:
    """What each ``sess.run`` costs beyond its ops: an untraced step without work, less what
    the simulator gives that step from the measured op costs alone."""
    empty = statistics.median(run.interleaved[idle.name])
    cluster = dataclasses.replace(
        probe.cluster,
        speeds=(MAX_SPEED,),
        link=LinkConfig(bandwidth_gbps=math.inf, latency_us=latency * 1e6),
    )
    ops_only = dataclasses.replace(
        probe, cluster=cluster, costs={**probe.costs, **costs, "session_run": 0.0}
    ).with_run(steps=5)
    simulated = statistics.median(
        s.duration for s in simulate(ops_only, numerics=False, detail=False).trace.steps
    )
    return max(empty - simulated, 0.0)


def _latency(graph: Graph, records: list[OpRecord]) -> float:
    spans = {(r.op, r.step): r for r in records}
    gaps = []
    for src, dst in dict.fromkeys((t.src, t.dst) for t in graph.edges()):
        if graph.op(src).device == graph.op(dst).device:
            continue
        for (name, step), record in spans.items():
            if name == dst and (src, step) in spans:
                gaps.append(record.start - spans[src, step].end)
    return max(statistics.median(gaps), 0.0) if gaps else 0.0
