"""Which cross-check a scenario gets, read off its graph, never off its training mode's name.

- a graph whose ops run only on a real cluster (SyncReplicasOptimizer's queue and
  accumulators): :mod:`simsync.crosscheck.sync_replicas`;
- a graph with several clients racing: :mod:`simsync.crosscheck.asynchronous`;
- any other graph (one client: towers, batch norm): :mod:`simsync.crosscheck.compare`.
"""

from __future__ import annotations

from collections.abc import Callable

from simsync.crosscheck.asynchronous import crosscheck_async
from simsync.crosscheck.compare import MACHINE, CrossCheck, crosscheck_one_client, resolve_profile
from simsync.crosscheck.sync_replicas import crosscheck_sync_replicas, needs_cluster
from simsync.ir import racing_clients
from simsync.patterns import build
from simsync.scenario import Scenario
from simsync.scenario.profile import Profile

__all__ = ["crosscheck"]


def crosscheck(
    scenario: Scenario,
    *,
    profile: Profile | str | None = MACHINE,
    warmup: int = 2,
    open_ports: bool = False,
    cluster_file: str | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> CrossCheck:
    """Run ``warmup + [run] steps`` steps on TensorFlow and in the simulator and compare them.
    A graph whose ops run only on a real cluster (SyncReplicasOptimizer's queue and
    accumulators) gets the checks of :mod:`simsync.crosscheck.sync_replicas` (``open_ports``,
    ``cluster_file`` and ``on_progress`` are for it); a graph with several clients (a race
    between them) those of :mod:`simsync.crosscheck.asynchronous`. ``profile``: this
    machine's (:data:`~simsync.crosscheck.compare.MACHINE`, measured once and cached), a
    calibration profile, or None for the scenario's own costs."""
    graph = build(scenario)  # once: every check below runs this graph
    if needs_cluster(graph):
        return crosscheck_sync_replicas(
            scenario,
            graph,
            open_ports=open_ports,
            cluster_file=cluster_file,
            on_progress=on_progress,
        )
    resolved = resolve_profile(profile, on_progress)
    if racing_clients(graph):
        return crosscheck_async(
            scenario, graph, profile=resolved, warmup=warmup, on_progress=on_progress
        )
    return crosscheck_one_client(
        scenario, graph, profile=resolved, warmup=warmup, on_progress=on_progress
    )
