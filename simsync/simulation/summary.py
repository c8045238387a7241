"""The summary ``simsync simulate`` prints: what a finished simulation measured, typed by
:class:`~simsync.simulation.results.Summary`."""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from simsync.engine.collection import with_collector_paused
from simsync.ir import Graph, counter_readers, critical_path, updating_clients
from simsync.kinds import resource_feeds
from simsync.kinds.moving_average import race_outcomes
from simsync.simulation.results import BatchNormSummary, Summary
from simsync.simulation.simulate import Simulation, batches_per_run
from simsync.trace import (
    StepRecord,
    Trace,
    expected_last,
    gradient_stats,
    push_outcomes,
    racing_updates,
    simulated_outcomes,
    staleness_by_client,
    staleness_stats,
    step_time_stats,
    sync_waits,
    throughput,
    updates_by_run,
)
from simsync.trace.staleness import Runs

__all__ = ["summary"]


def summary(sim: Simulation) -> Summary:
    """The JSON object of ``simsync simulate --json``: one key per measured quantity, typed
    by :class:`~simsync.simulation.results.Summary`.

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
        "applied_throughput": _samples_per_second(
            sim, batches, training_runs, _applied(training_runs, runs, push_outcomes(trace))
        ),
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


def _applied(
    runs: list[StepRecord], ledger: Runs, pushed: dict[tuple[str, int], str]
) -> list[StepRecord]:
    """The ``runs`` whose gradients moved the model: not dropped from the ledger of updates
    (too stale), nor refused by every accumulator they were pushed to."""
    return [
        run
        for run in runs
        if ledger.get(run[:2], (True, 0))[0] and pushed.get(run[:2]) != "dropped"
    ]


def _samples_per_second(
    sim: Simulation,
    batches: dict[str, int],
    runs: list[StepRecord],
    counted: list[StepRecord] | None = None,
) -> float | None:
    """Examples per second: the training ``runs``' batches (or those of the ``counted`` among
    them: the runs whose gradients were applied) over the runs' span."""
    if not runs:
        return None
    span = max(end for _, _, _, end, _ in runs) - min(start for _, _, start, _, _ in runs)
    made = Counter(s.client for s in (runs if counted is None else counted))
    samples = sum(batches[client] * count for client, count in made.items())
    return samples * sim.scenario.model.batch_size / span if span > 0 else None
