"""A contest of scenarios: loss against wall-clock time, and who reaches a target loss first.

The target is the worst of the runs' final losses, so that every run reaches it; a run's time
to target then weighs time per update (waiting for stragglers, or not) against progress per
update (stale gradients help less). Losses are moving averages over as many batches as one
synchronous step trains: one step in sync mode, N updates with N asynchronous workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simsync.errors import SimsyncError, UsageError
from simsync.ir import updating_clients
from simsync.scenario import Scenario
from simsync.simulation.simulate import Simulation, simulate, training_clients
from simsync.trace import Contest, Entrant, loss_curve, staleness_stats, time_to_loss

__all__ = ["Contest", "Entrant", "contest", "entrant_names", "line_up"]


def contest(
    scenarios: Sequence[Scenario], simulate_one: Callable[[Scenario], Simulation] = simulate
) -> Contest:
    """Simulate every scenario (with numerics: the loss is the point) and line them up.

    >>> from simsync.scenario import ClusterConfig, ComputeConfig, Scenario, TrainingConfig
    >>> base = Scenario("sync", cluster=ClusterConfig(2, (1.0, 0.5)),
    ...                 compute=ComputeConfig(mean=0.01)).with_run(steps=20)
    >>> result = contest([base, Scenario("async", cluster=base.cluster, compute=base.compute,
    ...                               training=TrainingConfig(mode="async")).with_run(steps=20)])
    >>> [e.name for e in result.entrants], [e.reached is not None for e in result.entrants]
    (['sync', 'async'], [True, True])
    """
    if len(scenarios) < 2:
        raise UsageError("compare needs at least two scenarios")
    simulations = []
    for scenario in scenarios:
        try:
            simulations.append(simulate_one(scenario))
        except SimsyncError as error:  # say which of the runs failed
            raise type(error)(f"{scenario.source}: {error}") from None
    return line_up(entrant_names(scenarios), simulations)


def line_up(
    names: Sequence[str], simulations: Sequence[Simulation], target: float | None = None
) -> Contest:
    """The runs ``simulations`` (each a trace of its graph, simulated or measured on
    TensorFlow) under ``names``, raced to ``target`` (by default the worst of their final
    losses)."""
    curves = []
    for sim in simulations:
        # as many batches as one synchronous step trains: one per training client
        curves.append(loss_curve(sim.trace, len(training_clients(sim.graph))))
    if target is None:
        target = max(curve[-1][1] for curve in curves)
    entrants = []
    for name, sim, curve in zip(names, simulations, curves, strict=True):
        ledger = staleness_stats(sim.trace)
        concurrent = len(updating_clients(sim.graph)) > 1  # updates can be stale
        entrants.append(
            Entrant(
                name,
                sim.graph.facts.mode,
                curve,
                time_to_loss(curve, target),
                ledger["updates_applied"],
                ledger["mean"] if concurrent else None,
                ledger["max"] if concurrent else None,
            )
        )
    return Contest(target, entrants)


def entrant_names(scenarios: Sequence[Scenario]) -> list[str]:
    """Scenario names, with the file added where two are the same, and a number where even
    that is the same.

    >>> from simsync.scenario import Scenario
    >>> entrant_names([Scenario("a", source="x.toml"), Scenario("a", source="y.toml"),
    ...         Scenario("a", source="y.toml"), Scenario("b")])
    ['a (x.toml)', 'a (y.toml)', 'a (y.toml) #2', 'b']
    """
    names = [s.name for s in scenarios]
    labels = [f"{s.name} ({s.source})" if names.count(s.name) > 1 else s.name for s in scenarios]
    seen: dict[str, int] = {}
    result = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        result.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return result
