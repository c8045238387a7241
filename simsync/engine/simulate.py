"""From a scenario to a finished simulation, and the summary ``simsync simulate`` prints.

A simulation is two stages: the engine runs the graph and records when everything happened
(:class:`~simsync.engine.Engine`), then the replay gives that trace its values
(:func:`simsync.replay.add_values`), unless numerics are off.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import TypedDict

from simsync.engine.collection import with_collector_paused
from simsync.engine.executor import Engine, StepCallback
from simsync.engine.results import BatchNormSummary, Summary
from simsync.errors import SimulationError
from simsync.ir import Graph, counter_readers, critical_path, run_orders, updating_clients
from simsync.kinds import check_graph, kind_of, resource_feeds, sync_points
from simsync.kinds.moving_average import race_outcomes
from simsync.numerics import ModelSpec
from simsync.patterns import build
from simsync.replay import add_values
from simsync.scenario import Scenario
from simsync.scenario.budget import BYTES_PER_OP, SECONDS_PER_OP, Estimate, physical_memory
from simsync.scenario.load import check_scenario
from simsync.trace import (
    StepRecord,
    Trace,
    expected_last,
    gradient_stats,
    racing_updates,
    simulated_outcomes,
    staleness_by_client,
    staleness_stats,
    step_time_stats,
    sync_waits,
    throughput,
    updates_by_run,
)

__all__ = [
    "Simulation",
    "expected_updates",
    "median_step_time",
    "simulate",
    "summary",
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


def summary(sim: Simulation) -> Summary:
    """The JSON object of ``simsync simulate --json``: one key per measured quantity, typed
    by :class:`~simsync.engine.results.Summary`.

    Everything is a function of the scenario and its seed except ``wall_seconds``, the time the
    simulation itself took. A *step* is a run of a client that updates the model: the one
    client's run with towers, each worker's update in asynchronous training, each apply of
    SyncReplicasOptimizer's chief; ``steps`` counts them and ``step_time`` describes them
    (in a graph whose runs update nothing, every run of a client that is not a daemon).
    ``towers`` counts the graph's towers (the ops' ``tower`` indices; 1 when none has one).
    ``staleness`` describes the applied updates of the ledger; ``gradients`` the gradients
    pushed to accumulators (None when there are none). ``values_skipped``, present only when
    the run asked for values and computed none, says why (a ``generic`` op stands where they
    would pass, see :mod:`simsync.kinds.generic`); the losses are then None.
    """
    return with_collector_paused(_summary, sim)  # the trace's records make no cycles


def _summary(sim: Simulation) -> Summary:
    scenario, trace, graph = sim.scenario, sim.trace, sim.graph
    updating = set(updating_clients(graph))
    batches = batches_per_run(graph)
    training = {client for client, count in batches.items() if count}
    # a graph whose runs update nothing (built by hand, for timing): a step is any loop's run
    steps = _runs_of(sim, updating or {c.name for c in graph.clients if not c.daemon})
    stats = step_time_stats(Trace(steps=steps))
    waits = sync_waits(graph, trace, sim.sync_points)
    feeds = resource_feeds(graph)
    training_runs = _runs_of(sim, training)
    losses = [s.loss for s in training_runs]
    path, path_seconds = critical_path(graph)
    runs = updates_by_run(trace)  # read twice below
    ledger = staleness_stats(trace, runs)
    summary: Summary = {
        "scenario": scenario.name,
        "source": scenario.source,
        "mode": graph.facts.mode,
        "aggregation": graph.facts.aggregation,
        "towers": max(len(graph.towers), 1),  # the graph's, not the scenario's
        # a timing-only graph (imported) computes no loss: its workers are its loops (a
        # daemon, a queue runner, is none)
        "workers": len(training or [c for c in graph.clients if not c.daemon]),
        "updating_clients": len(updating),
        "steps": len(steps),
        "seed": scenario.run.seed,
        "step_time": stats,
        "throughput": _samples_per_second(sim, batches, training_runs),
        "updates_per_second": throughput(Trace(steps=steps)),
        "staleness": {
            "mean": ledger["mean"],
            "max": ledger["max"],
            "histogram": ledger["histogram"],
        },
        "updates_applied": ledger["updates_applied"],
        "updates_dropped": ledger["updates_dropped"],
        "staleness_by_client": staleness_by_client(trace, runs),
        "gradients": gradient_stats(trace, counter_readers(graph)),
        "sync_points": sim.sync_points,
        "wait": {w.sync_point: w.mean_wait for w in waits},
        "waited_for": {w.sync_point: w.last for w in waits},
        "expected_last": {p: expected_last(graph, p, feeds) for p in sim.sync_points},
        "critical_path": {"ops": path, "seconds": path_seconds},
        "loss": losses,
        "final_loss": next((loss for loss in reversed(losses) if loss is not None), None),
        "events": trace.events,
        "wall_seconds": sim.wall_seconds,
        **_batch_norm(sim),
    }
    if trace.values_skipped:  # only when values were asked for and could not be computed
        summary["values_skipped"] = trace.values_skipped
    return summary


class _BatchNormPart(TypedDict, total=False):
    batch_norm: BatchNormSummary


def _batch_norm(sim: Simulation) -> _BatchNormPart:
    """With batch norm: its variant, the final moving statistics (by their short names) and
    the moving-average updates whose read version was replaced before they wrote."""
    graph, trace = sim.graph, sim.trace
    if graph.facts.batch_norm is None:
        return {}
    outcomes = simulated_outcomes(graph, trace)
    first = next(iter(outcomes.values()), None)
    return {
        "batch_norm": {
            "variant": graph.facts.batch_norm,
            "momentum": sim.scenario.model.momentum,
            **_moving_statistics(trace),
            "racing_updates": racing_updates(graph, trace),
            # what the moving statistics' updates of a step make of them, most often
            "outcome": first.most_common(1)[0][0] if first else None,
            "allowed_outcomes": _allowed_outcomes(graph),
        }
    }


class _MovingStatistics(TypedDict, total=False):
    moving_mean: list[float]
    moving_variance: list[float]


def _moving_statistics(trace: Trace) -> _MovingStatistics:
    """The final moving statistics by their short names (none without numerics)."""
    values = {name.rpartition("/")[2]: value.tolist() for name, value in trace.values.items()}
    if not values:
        return {}
    return {"moving_mean": values["moving_mean"], "moving_variance": values["moving_variance"]}


def _allowed_outcomes(graph: Graph) -> list[str]:
    """What one step's updates of a moving statistic may make of it, whatever the order in
    which they read and land: one update per updating op of the first such variable."""
    writes = [op.writes for op in graph.ops()]
    valued = [v for v, variable in graph.variables.items() if variable.initial is not None]
    updates = sum(1 for written in writes if valued and valued[0] in written)
    return list(race_outcomes(0.0, [0.0] * updates, 0.5))


def _runs_of(sim: Simulation, clients: set[str]) -> list[StepRecord]:
    """The runs of ``clients``, in order: the trace's own list when they are all the graph's."""
    if all(client.name in clients for client in sim.graph.clients):
        return sim.trace.steps
    return [s for s in sim.trace.steps if s.client in clients]


def _samples_per_second(
    sim: Simulation, batches: dict[str, int], runs: list[StepRecord]
) -> float | None:
    """Examples trained per second: the training ``runs``' batches over their span."""
    if not runs:
        return None
    span = max(end for _, _, _, end, _ in runs) - min(start for _, _, start, _, _ in runs)
    made = Counter(s.client for s in runs)
    samples = sum(batches[client] * count for client, count in made.items())
    return samples * sim.scenario.model.batch_size / span if span > 0 else None
