"""Which cross-check a scenario gets, read off its graph, never off its training mode's name.

- a graph whose ops run only on a real cluster (SyncReplicasOptimizer's queue and
  accumulators): :mod:`simsync.crosscheck.sync_replicas`;
- a graph with several clients racing: :mod:`simsync.crosscheck.asynchronous`;
- any other graph (one client: towers, batch norm): :mod:`simsync.crosscheck.compare`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from simsync.crosscheck.asynchronous import crosscheck_async
from simsync.crosscheck.compare import MACHINE, CrossCheck, crosscheck_one_client, resolve_profile
from simsync.crosscheck.report import Arrival
from simsync.crosscheck.sync_replicas import crosscheck_sync_replicas, needs_cluster
from simsync.ir import racing_clients
from simsync.patterns import build
from simsync.scenario import Scenario
from simsync.scenario.profile import Profile
from simsync.words import listed, plural

__all__ = ["crosscheck"]


def crosscheck(
    scenario: Scenario,
    *,
    profile: Profile | str | None = MACHINE,
    warmup: int = 2,
    open_ports: bool = False,
    cluster_file: str | None = None,
    on_progress: Callable[[str], None] | None = None,
    fit_cores: bool = False,
) -> CrossCheck:
    """Run ``warmup + [run] steps`` steps on TensorFlow and in the simulator and compare them.
    A graph whose ops run only on a real cluster (SyncReplicasOptimizer's queue and
    accumulators) gets the checks of :mod:`simsync.crosscheck.sync_replicas` (``open_ports``,
    ``cluster_file`` and ``on_progress`` are for it); a graph with several clients (a race
    between them) those of :mod:`simsync.crosscheck.asynchronous`. ``profile``: this
    machine's (:data:`~simsync.crosscheck.compare.MACHINE`, measured once and cached), a
    calibration profile, or None for the scenario's own costs. With ``fit_cores`` (a
    lesson's check), towers of one client that outnumber this machine's cores, with no GPU
    here, run as many of them as it has cores (:func:`fewer_towers`): on shared cores more
    towers take turns, as GPUs do not, and the timing could not tell one from the other."""
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
    fewer = fewer_towers(scenario, resolved) if fit_cores else None
    if fewer is not None:  # another scenario: its own graph
        scenario, graph = fewer.scenario, build(fewer.scenario)
    checked = crosscheck_one_client(
        scenario, graph, profile=resolved, warmup=warmup, on_progress=on_progress
    )
    if fewer is not None and checked.report["check"] == "one_client":
        checked.report["fewer_towers"] = fewer.said
        for found in checked.report["evidence"]["arrivals"]:
            _rename(found, fewer.names)
    return checked


def _rename(found: Arrival, names: Mapping[str, str]) -> None:
    """Who arrived last at a sync point, in the towers' names of the scenario asked for (a
    learner who was told the slow tower is ``tower_2`` read "tower_1" last, the name of the
    run of fewer towers).

    >>> found = {"sync_point": "s", "steps": 2, "last": {"tower_0": 0, "tower_1": 2},
    ...          "mean_wait": {"tower_0": 0.1, "tower_1": 0.0}, "expected": "tower_1",
    ...          "predicted_last": "tower_1"}
    >>> _rename(found, {"tower_0": "tower_0", "tower_1": "tower_2"})
    >>> found["last"], found["expected"], found["predicted_last"]
    ({'tower_0': 0, 'tower_2': 2}, 'tower_2', 'tower_2')
    """
    found["last"] = {names.get(t, t): n for t, n in found["last"].items()}
    found["mean_wait"] = {names.get(t, t): w for t, w in found["mean_wait"].items()}
    found["expected"] = names.get(found["expected"], found["expected"])
    if "predicted_last" in found:
        found["predicted_last"] = names.get(found["predicted_last"], found["predicted_last"])


@dataclass(frozen=True)
class FewerTowers:
    """A scenario of fewer towers than asked, and why, in one line."""

    scenario: Scenario
    said: str
    #: each tower of the run by its name in the scenario asked for (``tower_1``: ``tower_2``)
    names: dict[str, str]


def fewer_towers(scenario: Scenario, profile: Profile | None) -> FewerTowers | None:
    """``scenario`` with as many towers as this machine's cores (``profile``'s), when it has
    more and no GPU: the slowest tower kept, then the first others. None when it fits.

    >>> from simsync.scenario import ClusterConfig
    >>> s = Scenario("s", cluster=ClusterConfig(4, (1.0, 0.8, 0.5, 1.0)))
    >>> here = Profile({}, 1.0, 0.0, 0.0, 5.0, host_cores=2)
    >>> fewer = fewer_towers(s, here)
    >>> fewer.scenario.cluster.speeds
    (1.0, 0.5)
    >>> print(fewer.said[-50:])
    the towers tower_0 and tower_2 (speeds 1 and 0.5).
    >>> fewer.names
    {'tower_0': 'tower_0', 'tower_1': 'tower_2'}
    >>> fewer_towers(s.with_run(steps=1), dataclasses.replace(here, host_cores=4)) is None
    True
    """
    cores = profile.host_cores if profile is not None else None
    towers = scenario.towers
    if profile is None or profile.gpus or cores is None or towers <= cores or cores < 1:
        return None
    speeds = scenario.cluster.speeds
    slowest = min(range(towers), key=lambda t: (speeds[t], t))
    kept = sorted({slowest, *[t for t in range(towers) if t != slowest][: cores - 1]})
    cluster = dataclasses.replace(
        scenario.cluster, devices=len(kept), speeds=tuple(speeds[t] for t in kept)
    )
    names = [f"tower_{t}" for t in kept]
    here = [f"tower_{t}" for t in range(len(kept))]
    shown = " and ".join(f"{speeds[t]:g}" for t in kept)
    said = (
        f"This machine has {plural(cores, 'core')} and no GPU: {towers} towers would take turns "
        f"on them, as {towers} GPUs would not. This check runs {len(kept)} of them, the towers "
        f"{listed(names)} (speeds {shown})."
    )
    return FewerTowers(
        dataclasses.replace(scenario, cluster=cluster), said, dict(zip(here, names, strict=True))
    )
