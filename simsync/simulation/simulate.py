"""From a scenario to a finished simulation (its summary: :mod:`simsync.simulation.summary`).

A simulation is two stages: the engine runs the graph and records when everything happened
(:class:`~simsync.engine.Engine`), then the replay gives that trace its values
(:func:`simsync.replay.add_values`), unless numerics are off.
"""

from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass

from simsync.engine.collection import with_collector_paused
from simsync.engine.executor import Engine, StepCallback
from simsync.errors import SimulationError
from simsync.ir import Graph, run_orders, updating_clients
from simsync.kinds import check_graph, kind_of, sync_points
from simsync.numerics import ModelSpec
from simsync.patterns import build
from simsync.replay import add_values
from simsync.scenario import Scenario
from simsync.scenario.budget import BYTES_PER_OP, SECONDS_PER_OP, Estimate, physical_memory
from simsync.scenario.load import check_scenario
from simsync.trace import (
    Trace,
)

__all__ = [
    "Simulation",
    "expected_updates",
    "median_step_time",
    "simulate",
    "training_clients",
]


@dataclass
class Simulation:
    """A scenario, the graph built for it, and the trace of running it."""

    scenario: Scenario
    graph: Graph
    trace: Trace
    wall_seconds: float

    @functools.cached_property
    def sync_points(self) -> list[str]:
        """The graph's sync points, resources included (:func:`simsync.kinds.sync_points`),
        computed once (summary, views and lessons all ask)."""
        return sync_points(self.graph)


def median_step_time(scenario: Scenario, steps: int = 200) -> float:
    """The median simulated step time of ``scenario`` over ``steps`` steps (numerics off)."""
    trace = simulate(scenario.with_run(steps=steps), numerics=False, detail=False).trace
    return float(statistics.median(step.duration for step in trace.steps))


def simulate(
    scenario: Scenario,
    *,
    numerics: bool = True,
    on_step: StepCallback | None = None,
    detail: bool = True,
    graph: Graph | None = None,
) -> Simulation:
    """Build the scenario's graph (unless given), run it for ``[run] steps`` steps on the
    engine (``detail=False``: keep only steps and the ledger, see :class:`Engine`) and, with
    ``numerics``, replay the trace for its values (:func:`simsync.replay.add_values`).

    The scenario is checked against the schema either way (a given graph does not skip
    ``[run] steps`` or the model's numbers): a :class:`~simsync.errors.ScenarioError` names
    the value. The graph is checked before anything runs (:func:`simsync.kinds.check_graph`,
    with the model when numerics are on): a malformed graph is a
    :class:`~simsync.errors.GraphError`.

    >>> from simsync.patterns import tiny_example
    >>> from simsync.scenario import Scenario, ClusterConfig, ComputeConfig
    >>> sim = simulate(Scenario("two", cluster=ClusterConfig(2, (1.0, 0.5)),
    ...                         compute=ComputeConfig(mean=0.01)).with_run(steps=2))
    >>> [round(s.duration, 6) for s in sim.trace.steps], sim.sync_points
    ([0.02, 0.02], ['average_gradients'])
    """
    if graph is None:
        graph = build(scenario)  # checks the scenario
    else:
        check_scenario(scenario)
        if detail:
            _fits_in_memory(graph, scenario.run.steps)
    model = scenario.model if numerics else None
    if model is not None:  # what the values need, before the run (the engine checks timing)
        check_graph(graph, model)
    engine = Engine(
        graph, steps=scenario.run.steps, seed=scenario.run.seed, on_step=on_step, detail=detail
    )
    started = time.perf_counter()
    # the run and its replay make no lasting reference cycles: one pause of the collector
    trace = with_collector_paused(_run_and_replay, _Stages(engine, model))
    return Simulation(scenario, graph, trace, time.perf_counter() - started)


def _fits_in_memory(graph: Graph, steps: int) -> None:
    """A graph of one's own (a scenario's was estimated before it was built): refused when
    its record of every op would not fit in this machine's memory
    (:mod:`simsync.scenario.budget`'s rates)."""
    runs = max((c.steps or steps for c in graph.clients if not c.daemon), default=steps)
    cost = Estimate(len(graph) * runs, len(graph) * runs * SECONDS_PER_OP,
                    len(graph) * runs * BYTES_PER_OP)  # fmt: skip
    memory = physical_memory()
    if memory is not None and cost.bytes > memory:
        raise SimulationError(
            f"{len(graph):,} ops run {runs:,} times would take {cost}, and this machine has "
            f"{memory / 1e9:.1f} GB: simulate fewer steps, or keep only the steps "
            "(detail=False)"
        )


@dataclass(frozen=True)
class _Stages:
    engine: Engine
    model: ModelSpec | None


def _run_and_replay(stages: _Stages) -> Trace:
    """The engine's run, then (with a model) the replay of its trace for the values."""
    engine = stages.engine
    trace = engine.run()
    if stages.model is not None:
        add_values(engine.graph, trace, stages.model, engine.seed)
    return trace


def batches_per_run(graph: Graph) -> dict[str, int]:
    """Per client, the batches one of its runs trains on (its ops that compute a loss)."""
    orders = run_orders(graph, [client.fetches for client in graph.clients])
    return {
        client.name: sum(1 for name in order if kind_of(graph.op(name).kind).carries_loss)
        for client, order in zip(graph.clients, orders, strict=True)
    }


def training_clients(graph: Graph) -> list[str]:
    """The clients whose runs train on a batch (they compute a loss): the towers' one client,
    every asynchronous worker, every SyncReplicas worker."""
    return [client for client, batches in batches_per_run(graph).items() if batches]


def expected_updates(graph: Graph, steps: int) -> int:
    """How many runs of the updating clients a simulation of ``steps`` steps makes: one per
    step for each client that runs ``steps`` times or until a global step, all of a shared pool
    (the progress bar's total)."""
    updating = set(updating_clients(graph))
    clients = [c for c in graph.clients if c.name in updating]
    return sum(c.steps or steps for c in clients) or steps
