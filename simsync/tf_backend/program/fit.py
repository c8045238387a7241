"""An imported program's traced latencies, scaled to its untraced step (no TensorFlow here).

A traced ``sess.run`` is slower than an untraced one (``step_stats`` are collected for every
op), and the few traced steps of a profile see a different share of this machine's cores
than a steady loop does. The profile times both (:mod:`simsync.tf_backend.program.profile`):
a block of untraced steps (the step's wall time, as a cross-check measures it) and the traced
latencies. :func:`fit_costs` scales every op's latency by one factor, found by simulating the
graph as written, so that its simulated step is the untraced median wall time; what a
``sess.run`` costs beyond its ops (the client's overhead, measured apart) is not scaled.

So for a program as written the simulated step is its own profiling run's step, by
construction: a cross-check of it tests how well that run foretells fresh ones. A what-if
(``--towers``, ``--speeds``, a link, a mode) is where the simulator's model is tested.

Only a loop of one client is fitted: the profile times each client alone, and clients that
run together share the machine in ways one factor cannot hold apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from simsync.engine import Simulation, simulate
from simsync.ir import Graph
from simsync.scenario import ClusterConfig, Scenario
from simsync.tf_backend.program.whatif import scaled

__all__ = ["FIT_STEPS", "fit_costs", "simulate_graph"]

#: steps simulated for each try of a scale (the median step is kept)
FIT_STEPS = 6
#: the scales a fit may take: beyond them the profile is not this graph's steady loop
LOWEST, HIGHEST = 0.05, 20.0


def fit_costs(graph: Graph, walls: Mapping[str, float]) -> tuple[Graph, dict[str, Any]]:
    """``graph`` with every op's cost scaled so that its one client's simulated median step
    is ``walls[client]`` (the profile's untraced median wall time), and what was done:
    ``{"scale", "wall", "simulated"}``, or ``{"scale": 1.0, "why"}`` when nothing was."""
    if len(graph.clients) != 1:
        why = f"{len(graph.clients)} threads loop: each was timed alone"
        return graph, {"scale": 1.0, "why": why}
    client = graph.clients[0]
    wall = walls.get(client.name)
    if not wall or wall <= 0:
        return graph, {"scale": 1.0, "why": "the profile has no untraced step time"}
    work = wall - client.overhead
    at_one = _simulated_step(graph) - client.overhead
    if work <= 0 or at_one <= 0:
        why = "the step is all sess.run's own work" if work <= 0 else "the ops take no time"
        return graph, {"scale": 1.0, "why": why}
    scale = _bounded(work / at_one)
    fitted = scaled(graph, scale)
    # once more: transfers and waits do not scale with the ops, so the step is not linear
    again = _simulated_step(fitted) - client.overhead
    if again > 0:
        scale = _bounded(scale * work / again)
        fitted = scaled(graph, scale)
    found: dict[str, Any] = {
        "scale": round(scale, 4),
        "wall": wall,
        "simulated": _simulated_step(fitted),
    }
    if scale in (LOWEST, HIGHEST):
        found["why"] = f"at its bound, {scale:g}: the traced steps are not this loop's"
    return fitted, found


def simulate_graph(
    graph: Graph, steps: int, *, name: str = "program", source: str = "", seed: int = 0
) -> Simulation:
    """``steps`` steps of an imported graph (changed or not) in the engine, timing only: the
    one way a program's graph is simulated, for a fit and for ``simulate PROGRAM.py``."""
    towers = max(len(graph.towers), 1)
    scenario = Scenario(name, source=source, cluster=ClusterConfig(devices=towers))
    return simulate(scenario.with_run(steps=steps, seed=seed), numerics=False, graph=graph)


def _simulated_step(graph: Graph) -> float:
    simulation = simulate_graph(graph, FIT_STEPS, name="fit")
    return statistics.median(step.duration for step in simulation.trace.steps)


def _bounded(scale: float) -> float:
    return min(HIGHEST, max(LOWEST, scale))
