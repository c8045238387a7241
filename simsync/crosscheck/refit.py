"""What drifts, measured again inside a cross-check's own session.

This machine's profile is measured once and cached (:mod:`simsync.tf_backend.profile.machine`),
and the machine's load moves after: an hour later six held-out cross-checks were off by a
median of about 16 %. So a cross-check of towers runs, interleaved round by round with the
scenario's own untraced steps, three probes on the scenario's own graph, and fits again what
drifts, as calibration fitted it (:mod:`simsync.simulation.calibrate`):

1. **no work** (every tower with next to no work): the session's own time per ``sess.run``,
   ``session_run``;
2. **one tower working**: the compute scale, real seconds per nominal second of work;
3. **as many towers working as the host has cores** (when there are more towers than cores):
   the cores' efficiency under load, from that probe's step against one tower working.

Each is the value with which the simulator gives the probe's measured median (bisection), the
ones before it already refitted. The scenario's own steps are not used: its step time stays a
prediction, now from what this session measured, with the profile's op costs, latency and
cores. The report gives both: the prediction from the profile as cached, and from the refit.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import NotRequired, TypedDict

from simsync.patterns import tower_device
from simsync.scenario import Scenario
from simsync.scenario.profile import Profile, apply_profile
from simsync.scenario.schema import MAX_SPEED
from simsync.simulation import median_step_time
from simsync.simulation.calibrate import solve
from simsync.tf_backend.session.execute import Variant
from simsync.tf_backend.session.prepare import TensorFlowRun

__all__ = ["NO_WORK", "Refit", "probes", "refit"]

#: The probe with no work: the session's own time.
NO_WORK = "no work"
#: Steps the simulator runs for a probe's step time (a fixed seed: the same draws each time).
STEPS = 100


class Refit(TypedDict):
    """Each refitted value, as ``[the profile's, this session's]``."""

    session_run: list[float]
    compute_scale: list[float]
    core_efficiency: list[float]
    #: the median step with no work measured, when it was shorter than the stored costs of
    #: its ops alone give (``session_run`` then fitted at 0: the least it can be)
    session_run_floor: NotRequired[float]


def probes(scenario: Scenario, profile: Profile | None) -> list[Variant]:
    """The probes a cross-check of ``scenario`` runs besides its variants (one tower working,
    already one of them when there are several towers): no work at all, and one tower per
    core working when the towers share fewer cores."""
    towers = scenario.towers
    found = [Variant(NO_WORK, {tower_device(t): MAX_SPEED for t in range(towers)})]
    cores = profile.host_cores if profile is not None else None
    if cores is not None and 2 <= cores < towers:
        idle = {tower_device(t): MAX_SPEED for t in range(cores, towers)}
        found.append(Variant(f"{cores} towers working", idle))
    return found


def refit(
    profile: Profile, scenario: Scenario, real: TensorFlowRun, one: Variant
) -> tuple[Profile, Refit] | None:
    """``profile`` with ``session_run``, ``compute_scale`` and ``core_efficiency`` fitted
    again on this session's probes (see the module's docstring); None when the run has no
    probe to fit on."""
    measured = real.interleaved
    if NO_WORK not in measured or one.name not in measured:
        return None

    def step(probe: Variant, changed: Profile) -> float:
        return median_step_time(probe.apply(apply_profile(scenario, changed)), STEPS)

    idle, *busy = probes(scenario, profile)  # as the run ran them
    empty = statistics.median(measured[idle.name])
    now = profile
    milliseconds = solve(  # solved in ms: the bisection keeps 4 decimals
        lambda ms: step(idle, dataclasses.replace(now, session_run=ms / 1e3)),
        empty,
        0.0,
        10e3 * empty,
    )
    now = dataclasses.replace(now, session_run=milliseconds / 1e3)
    alone = statistics.median(measured[one.name])
    scale = solve(lambda s: step(one, dataclasses.replace(now, compute_scale=s)), alone, 0.01, 10.0)
    now = dataclasses.replace(now, compute_scale=scale)
    if busy:  # one tower per core working, when the towers share fewer cores
        (cores,) = busy
        ratio = statistics.median(
            b / a for b, a in zip(measured[cores.name], measured[one.name], strict=True) if a > 0
        )

        def slowdown(e: float) -> float:
            changed = dataclasses.replace(now, core_efficiency=e)
            return step(cores, changed) / step(one, changed)

        now = dataclasses.replace(now, core_efficiency=solve(slowdown, ratio, 0.05, 1.0))
    found: Refit = {
        "session_run": [profile.session_run, now.session_run],
        "compute_scale": [profile.compute_scale, now.compute_scale],
        "core_efficiency": [profile.core_efficiency, now.core_efficiency],
    }
    if milliseconds <= 0.0:  # the bisection's lower end: the empty step ran faster than that
        found["session_run_floor"] = empty
    return now, found
