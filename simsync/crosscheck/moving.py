"""Batch norm's moving statistics, TensorFlow against the simulator.

Where no moving-average update races (``local``, ``synchronized``), the values must be equal.
Where they race (``update_ops``: every tower's ``assign_sub`` on one variable, each computed
from a value read early in the step), TensorFlow's thread scheduling picks the outcome, so the
check is what must hold instead: after every step, each moving statistic is one of the outcomes
the race allows (:func:`~simsync.kinds.moving_average.race_outcomes`: all updates read the old
value and add up, or they landed one after another), computed from the value before the step and
the towers' batch statistics of that step. The report says which outcome happened how often,
and what the simulator predicted (its updates read their versions at the step's start: a sum).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from simsync.crosscheck.report import MovingCheck, MovingRace
from simsync.kinds.moving_average import race_outcomes
from simsync.simulation import Simulation
from simsync.tf_backend import TensorFlowRun
from simsync.trace import racing_updates, simulated_outcomes

__all__ = ["moving_statistics"]

#: float64 on both sides; two outcomes of a race differ by about (1 - momentum)^2, far more
TOLERANCE = 1e-9


def moving_statistics(simulation: Simulation, real: TensorFlowRun) -> MovingCheck | None:
    """The moving statistics' section of a cross-check report (None without any)."""
    simulated, measured = simulation.trace.values, real.values
    if not measured:
        return None
    if racing_updates(simulation.graph, simulation.trace) == 0:
        diff = max(float(np.max(np.abs(simulated[n] - v))) for n, v in measured.items())
        return {
            "compared": sorted(measured),
            "max_abs_diff": diff,
            "tolerance": TOLERANCE,
            "ok": diff <= TOLERANCE,
        }
    return _race(simulation, real)


def _race(simulation: Simulation, real: TensorFlowRun) -> MovingRace:
    graph, momentum = simulation.graph, simulation.scenario.model.momentum
    previous = {
        name: np.full(v.shape, v.initial or 0.0)
        for name, v in graph.variables.items()
        if name in real.values
    }
    happened: dict[str, Counter[str]] = defaultdict(Counter)
    for record in real.moving:
        for variable in previous:
            ops = sorted(
                (op for op, written in record["updates"].items() if variable in written),
                key=lambda op: graph.op(op).tower or 0,
            )
            batches = [record["updates"][op][variable]["batch"] for op in ops]
            allowed = race_outcomes(previous[variable], batches, momentum)
            got = record["values"][variable]
            match = next(
                (
                    k
                    for k, value in allowed.items()
                    if np.allclose(got, value, rtol=0, atol=TOLERANCE)
                ),
                "none of the allowed outcomes",
            )
            happened[variable][match] += 1
            previous[variable] = got
    predicted = simulated_outcomes(graph, simulation.trace)
    return {
        "compared": [],
        "race": {
            "steps": len(real.moving),
            "happened": {v: dict(c.most_common()) for v, c in sorted(happened.items())},
            "predicted": {v: dict(c.most_common()) for v, c in sorted(predicted.items())},
            "racing_updates_predicted": racing_updates(graph, simulation.trace),
        },
        "ok": all("none of the allowed outcomes" not in c for c in happened.values()),
    }
