"""Cross-check an imported TensorFlow program: its imported graph, simulated, against runs of
the program itself on TensorFlow (``simsync crosscheck PROGRAM.py``).

The prediction comes from the imported graph and its costs (cached, or measured in the
import's own run); the measurements from other runs of the program, each a fresh process
(:func:`simsync.tf_backend.program.load.measure_program`): its graph rebuilt, its training
loop found again, each client then run alone, timed untraced steps and traced ones. So the
step time is predicted from one run and measured in others: with costs measured in the same
run, the simulated step of the graph as written would equal the measured one by construction
(the client's overhead is what the ops do not explain).

1. **Structure.** Every happens-before relation of the imported graph, on every traced step
   of every run (:func:`simsync.crosscheck.compare.structure`), among the ops the profile saw
   run (TensorFlow folds a few before the step: those are not in any trace).
2. **Who arrived last** at each sync point, by the one rule of simulated and real traces
   (:func:`simsync.crosscheck.evidence.arrivals`, :func:`simsync.trace.came_last`), in the
   simulation and in the traced steps; a tower is named only when it was last more often
   than chance allows.
3. **Step time**: the simulated median against the median of the runs' median wall times
   (within :data:`STEP_TOLERANCE`), per client.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from simsync.crosscheck.compare import relative_error, structure
from simsync.crosscheck.evidence import INCONCLUSIVE, arrivals, usually_last
from simsync.engine import Simulation
from simsync.ir import Graph
from simsync.trace import OpRecord, StepRecord, Trace

__all__ = ["STEP_TOLERANCE", "program_report", "real_trace"]

#: the measured median step time the prediction must be within, relatively
STEP_TOLERANCE = 0.10


def real_trace(
    graph: Graph, runs: Sequence[Mapping[str, Any]], threads: Mapping[str, str]
) -> Trace:
    """The traced steps of ``runs`` (each :func:`measure_loop`'s result) as one trace, the
    steps of run ``r`` numbered from ``r * 1000``; ``threads`` maps a thread to its client's
    name. Ops not in ``graph`` (constants, the runtime's own) are left out."""
    trace = Trace(source="tensorflow")
    for number, run in enumerate(runs):
        for thread, measured in run["clients"].items():
            client = threads.get(thread)
            if client is None:
                continue
            for index, records in enumerate(measured["steps"]):
                step = number * 1000 + index
                kept = [r for r in records if r[0] in graph.nx]
                if not kept:
                    continue
                for name, device, start, end in kept:
                    trace.ops.append(
                        OpRecord(name, "generic", (device,), client, step, start, start, end)
                    )
                first = min(r[2] for r in kept)
                trace.steps.append(StepRecord(client, step, first, max(r[3] for r in kept)))
    return trace


def program_report(
    graph: Graph,
    simulation: Simulation,
    runs: Sequence[Mapping[str, Any]],
    threads: Mapping[str, str],
    timed: set[str],
) -> dict[str, Any]:
    """The report of ``simsync crosscheck PROGRAM.py``: the measured ``runs`` of the
    program whose graph is ``graph`` (checked among the ``timed`` ops: those the profile saw
    run), against ``simulation`` (of ``graph``, or of a what-if of it: then who arrived last
    is compared where the sync points have the same names). See the module's docstring."""
    real = real_trace(graph, runs, threads)
    among = {op.name for op in graph.ops() if op.name in timed}
    found = structure(graph, real, among=among)
    predicted = {a["sync_point"]: a for a in arrivals(simulation.graph, simulation.trace)}
    last = []
    for measured in arrivals(graph, real):
        point = measured["sync_point"]
        real_last = usually_last(measured)
        simulated = predicted.get(point)
        sim_last = usually_last(simulated) if simulated else None
        if real_last is None:
            verdict = INCONCLUSIVE
        else:
            verdict = "as predicted" if real_last == sim_last else "not as predicted"
        last.append(
            {
                "sync_point": point,
                "steps": measured["steps"],
                "measured_last": measured["last"],
                "measured": real_last,
                "predicted": sim_last,
                "verdict": verdict,
            }
        )
    return {
        "check": "program",
        "runs": len(runs),
        "traced_steps": len(real.steps),
        "structure": {**found, "among": len(among), "not_timed": len(graph) - len(among)},
        "arrivals": last,
        "step_time": _step_times(simulation, runs, threads),
    }


def _step_times(
    simulation: Simulation, runs: Sequence[Mapping[str, Any]], threads: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Per client: the simulated median step against the median of the runs' medians. Only
    for a loop of one client: the runs measure each client alone, while the simulation runs
    them together."""
    found: list[dict[str, Any]] = []
    if len(threads) != 1:
        return found
    for thread, client in threads.items():
        simulated = [s.duration for s in simulation.trace.steps if s.client == client]
        medians = [
            statistics.median(run["clients"][thread]["walls"])
            for run in runs
            if run["clients"].get(thread, {}).get("walls")
        ]
        if not simulated or not medians:
            continue
        predicted = statistics.median(simulated)
        measured = statistics.median(medians)
        error = relative_error(predicted, measured)
        found.append(
            {
                "client": client,
                "predicted": predicted,
                "measured": measured,
                "run_medians": medians,
                "error": error,
                "ok": error is not None and abs(error) <= STEP_TOLERANCE,
            }
        )
    return found
