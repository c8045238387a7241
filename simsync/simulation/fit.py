"""An imported program's traced op times, fitted to its untraced step (no TensorFlow here).

A traced ``sess.run`` is slower than an untraced one (``step_stats`` are collected for every
op), and the few traced steps of a profile see a different share of this machine's cores
than a steady loop does. The profile times both (:mod:`simsync.tf_backend.program.step_costs`):
a block of untraced steps (the step's wall time, as a cross-check measures it) and the traced
op times. :func:`fit_costs` simulates the graph as written with the ops as traced, then:

- where the simulated step is **shorter** than the untraced one, the ops keep their times and
  the rest is work of TensorFlow's own in every run (``per_run``: the executor starting the
  run), the client's ``run_work``: it holds a core but not the GIL, and it does not grow
  with the towers, as a factor on every op would make it;
- where it is **longer**, the traced ops ran slower than untraced ones: every op's time is
  scaled down by one factor (``scale``).

What a ``sess.run`` of one ``NoOp`` costs (the client's overhead, ``run_work`` and
``run_latency`` as imported, measured apart) is never scaled; ``per_run`` comes on top of
it. Either way the fitted graph's simulated step is the untraced median wall time.

So for a program as written the simulated step is its own profiling run's step, by
construction: a cross-check of it tests how well that run foretells fresh ones. A what-if
(``--towers``, ``--speeds``, a link, a mode) is where the simulator's model is tested.

A loop of one client is fitted, and a loop of clients the profile timed together (workers of
``SyncReplicasOptimizer``, which cannot run alone): to the median of their untraced steps.
Other clients (threads of asynchronous training) are timed alone, and clients that run
together share the machine in ways one factor cannot hold apart. Queue runners' threads
(daemons) ran beside it in the profile as in the simulation: their ops are scaled too, and
they do no ``per_run`` work.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from simsync.ir import Graph
from simsync.scenario import ClusterConfig, Scenario
from simsync.simulation import Simulation, simulate
from simsync.tf_backend.program.whatif import scaled, with_run_work

__all__ = ["FIT_FORM", "FIT_STEPS", "apply_fit", "fit_costs", "simulate_graph"]

#: the form of a kept fit: a fit kept in another form is found again (3: per_run on top of a
#: NoOp run's run_work; 4: tried until within 1 %)
FIT_FORM = 4
#: steps simulated for each try of a scale (the median step is kept)
FIT_STEPS = 6
#: the scales a fit may take: beyond them the profile is not this graph's steady loop
LOWEST, HIGHEST = 0.05, 20.0
#: how close to the untraced step a fit's simulated step must come, relatively, and in how
#: many tries at most
CLOSE, TRIES = 0.01, 4
#: the most of a step that TensorFlow's own work in a run may take: beyond it, as beyond the
#: scales' bounds, the profile is not this graph's steady loop
MOST_PER_RUN = 0.9


def fit_costs(
    graph: Graph, walls: Mapping[str, float], together: bool = False
) -> tuple[Graph, dict[str, Any]]:
    """``graph`` fitted so that its one client's simulated median step is ``walls[client]``
    (the profile's untraced median wall time), or its clients' median step the median of
    their walls when they were timed ``together``, and what was done (see the module's
    docstring): ``{"scale", "per_run", "wall", "simulated"}``, or ``{"scale": 1.0, "why"}``
    when nothing was."""
    loops = [client for client in graph.clients if not client.daemon]  # not queue runners
    if len(loops) != 1 and not together:
        why = f"{len(loops)} threads loop: each was timed alone"
        return graph, {"scale": 1.0, "why": why}
    client = loops[0]
    found_walls = [walls[c.name] for c in loops if walls.get(c.name)]
    wall = statistics.median(found_walls) if found_walls else None
    if not wall or wall <= 0:
        return graph, {"scale": 1.0, "why": "the profile has no untraced step time"}
    # a sess.run of one NoOp, measured apart
    fixed = client.overhead + client.run_work + client.run_latency
    work = wall - fixed
    at_one = _simulated_step(graph) - fixed
    if work <= 0 or at_one <= 0:
        why = "the step is all sess.run's own work" if work <= 0 else "the ops take no time"
        return graph, {"scale": 1.0, "why": why}
    if work >= at_one:  # the ops as traced leave time over: TensorFlow's own work per run
        found = _per_run(graph, wall, work - at_one)
    else:  # the traced ops take longer than the step: they ran slower traced
        found = _scale(graph, wall, at_one, fixed)
    fitted = apply_fit(graph, found)
    found["simulated"] = _simulated_step(fitted)
    if found["scale"] in (LOWEST, HIGHEST):
        found["why"] = f"at its bound, {found['scale']:g}: the traced steps are not this loop's"
    elif found["per_run"] > MOST_PER_RUN * wall:
        share = found["per_run"] / wall
        if any(name.startswith("/job:") for name in graph.devices):
            # a task of a cluster: each run calls the others (gRPC), beyond its ops
            found["why"] = f"{share:.0%} of the step outside its ops: its tasks' calls (gRPC)"
        else:
            found["why"] = (
                f"{share:.0%} of the step outside its ops: the traced steps are not this loop's"
            )
    return fitted, found


def _per_run(graph: Graph, wall: float, extra: float) -> dict[str, Any]:
    """The time a run takes beyond its ops as traced, tried again until the step is within
    :data:`CLOSE` of the wall (:data:`TRIES` at most): the cores it holds slow the ops beside
    it (a queue runner's), so the step is not linear in it."""
    found: dict[str, Any] = {"scale": 1.0, "per_run": extra, "wall": wall}
    for _ in range(TRIES):
        again = _simulated_step(apply_fit(graph, found))
        if abs(again - wall) <= CLOSE * wall:
            break
        found["per_run"] = round(max(0.0, found["per_run"] + wall - again), 9)
    return found


def _scale(graph: Graph, wall: float, at_one: float, fixed: float) -> dict[str, Any]:
    """One factor for every op's cost, tried again until the step is within :data:`CLOSE`
    of the wall (:data:`TRIES` at most): transfers, waits and a queue runner's runs do not
    scale with the ops, so the step is not linear in it."""
    work = wall - fixed
    found: dict[str, Any] = {"scale": _bounded(work / at_one), "per_run": 0.0, "wall": wall}
    for _ in range(TRIES):
        again = _simulated_step(apply_fit(graph, found))
        if again - fixed <= 0 or abs(again - wall) <= CLOSE * wall:
            break
        found["scale"] = round(_bounded(found["scale"] * work / (again - fixed)), 4)
    return found


def apply_fit(graph: Graph, fit: Mapping[str, Any]) -> Graph:
    """``graph`` with a fit applied: every op's cost times ``scale``, and ``per_run`` more
    seconds of TensorFlow's own work in every run (``Client.run_work``: a core, not the
    GIL; a thread of a mode change, which copies the client, does it too)."""
    scale, extra = float(fit.get("scale", 1.0)), float(fit.get("per_run", 0.0))
    fitted = graph if scale == 1.0 else scaled(graph, scale)
    if extra > 0:
        fitted = with_run_work(fitted, extra)
    return fitted


def simulate_graph(
    graph: Graph, steps: int, *, name: str = "program", source: str = "", seed: int = 0
) -> Simulation:
    """``steps`` steps of an imported graph (changed or not) in the engine, timing only: the
    one way a program's graph is simulated, for a fit and for ``simulate PROGRAM.py``."""
    towers = max(len(graph.towers), 1)
    scenario = Scenario(name, source=source, cluster=ClusterConfig(devices=towers))
    return simulate(scenario.with_run(steps=steps, seed=seed), numerics=False, graph=graph)


def _simulated_step(graph: Graph) -> float:
    """The simulated median step of the graph's loop (not its queue runners' runs)."""
    simulation = simulate_graph(graph, FIT_STEPS, name="fit")
    loops = {client.name for client in graph.clients if not client.daemon}
    return statistics.median(s.duration for s in simulation.trace.steps if s.client in loops)


def _bounded(scale: float) -> float:
    return min(HIGHEST, max(LOWEST, scale))
