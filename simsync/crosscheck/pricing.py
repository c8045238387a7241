"""What a SyncReplicas cluster's own ops cost on this machine, measured once and cached.

One process's profile (:mod:`simsync.tf_backend.profile.machine`) says nothing of a cluster:
there each worker reads the variables, pushes its gradients and dequeues its token by gRPC
from the parameter server, and every task is a process of its own, all of them on this
machine's cores. So a small reference cluster (one parameter server, two workers, R = 2, no
compute of its own beyond its small model) runs once, and its trace (mapped onto the
pattern's ops, :func:`~simsync.tf_backend.cluster.trace.cluster_trace`) gives the costs of the
pattern's own op kinds (:data:`PRICED`), and the ``sess.run`` overhead of a worker's run:

- an op that never waits (a read, a push, an update): the median of its durations;
- an op that can block (a dequeue waiting for a token, a take waiting for gradients): a low
  quantile (:data:`UNBLOCKED_QUANTILE`), the runs that did not wait;
- ``session_run``: the median over the workers' runs of the time outside their ops.

The result is kept beside the machine's profile, ``cluster-costs/<machine>.json`` in
simsync's cache folder, for the same machine key (TensorFlow's version, devices, host,
processor, cores), written atomically under a lock: two cross-checks measure it once.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simsync.files import read_json, write_text
from simsync.kinds import kind_of
from simsync.patterns.sync_replicas import QUEUE_RUNNER
from simsync.scenario import Scenario
from simsync.trace import Trace, takes

__all__ = [
    "PRICED",
    "cluster_costs",
    "costs_of",
    "priced",
    "reference_config",
    "time_between_applies",
]

#: The op kinds of the SyncReplicas pattern a cluster prices (each under its kind's
#: ``[costs]`` key): the read of the variables, the push of a gradient, the dequeue of a token,
#: the take of R gradients, the update of a variable, the enqueue of the tokens.
PRICED = ("read", "push_gradients", "dequeue_token", "take_gradients", "apply", "enqueue_tokens")
#: A dequeue can wait for a token: its cost is this quantile of its durations (the runs that
#: did not wait).
UNBLOCKED_QUANTILE = 0.2
#: The reference cluster's global steps (the first two are left out: start-up).
REFERENCE_STEPS = 40
_FOLDER = "cluster-costs"
_VERSION = 2


def reference_config() -> Any:
    """The reference cluster: one parameter server, two workers, R = 2, the machine
    reference's small model, and no compute made real."""
    from simsync.tf_backend.cluster import ClusterRunConfig, ModelWorkload
    from simsync.tf_backend.profile.machine import REFERENCE

    return ClusterRunConfig(
        ModelWorkload(REFERENCE.model),
        workers=2,
        replicas_to_aggregate=2,
        steps=REFERENCE_STEPS,
        seed=0,
    )


def costs_of(trace: Trace, kinds: dict[str, str]) -> dict[str, float]:
    """The costs of a cluster's trace (ops already mapped onto the pattern's; ``kinds``: op
    name -> kind), by ``[costs]`` key; runs of the first two global steps are left out (the
    start: connections, first kernels).

    - a read, a push, an update, an enqueue: the median of its durations;
    - a take: the median time from the end of the last push it averaged to its end;
    - a dequeue: the :data:`UNBLOCKED_QUANTILE` of its durations (the runs not kept waiting);
    - ``session_run``: a worker's time from its token (its dequeue's end) to its next run's
      first push, less the read (the model's own compute is left in: it is small, and the
      cluster's work comes on top of it);
    - ``queue_runner_run``: the chief's queue runner's time from its enqueue of the tokens to
      its next take (its ``sess.run`` returning and starting again).

    >>> from simsync.trace import OpRecord
    >>> def ops(client, step, start):
    ...     return [OpRecord(f"{client}/{name}", kind, (), client, step, 0, start + s, start + e)
    ...             for name, kind, s, e in (("read", "read", 0, 0.001),
    ...                                      ("push", "push_gradients", 0.004, 0.0045),
    ...                                      ("dequeue", "dequeue_token", 0.0045, 0.005))]
    >>> trace = Trace(ops=[r for step in range(2, 6) for r in ops("worker_0", step, step)])
    >>> costs = costs_of(trace, {r.op: r.kind for r in trace.ops})
    >>> costs["read"], costs["push_gradients"], costs["dequeue_token"], costs["session_run"]
    (0.001, 0.0005, 0.0005, 0.998)
    """
    durations: dict[str, list[float]] = defaultdict(list)
    first: dict[tuple[str, int, str], float] = {}
    last: dict[tuple[str, int, str], float] = {}
    ends = {(r.client, r.step, r.op): r.end for r in trace.ops}
    for record in trace.ops:
        if record.step < 2:
            continue
        kind = kinds.get(record.op, "")
        if kind in PRICED and kind != "take_gradients":
            durations[kind].append(record.end - record.start)
        key = (record.client, record.step, kind)
        first[key] = min(first.get(key, record.start), record.start)
        last[key] = max(last.get(key, record.end), record.end)
    for take, pushes in takes(trace.resources):
        end = ends.get((take.client, take.step, take.op))
        pushed = [ends[p.client, p.step, p.op] for p in pushes if (p.client, p.step, p.op) in ends]
        if take.step >= 2 and end is not None and pushed and len(pushed) == len(pushes):
            start = first.get((take.client, take.step, "take_gradients"), end)
            durations["take_gradients"].append(end - max(start, *pushed))
    found = {}
    for kind, seconds in sorted(durations.items()):
        op_kind = kind_of(kind)
        if kind == "dequeue_token":  # it can wait for a token
            ordered = sorted(seconds)
            found[op_kind.cost_key or kind] = ordered[int(UNBLOCKED_QUANTILE * (len(ordered) - 1))]
        else:
            found[op_kind.cost_key or kind] = statistics.median(seconds)
    worker_gaps = _gaps(last, first, "dequeue_token", "push_gradients", lambda c: c != QUEUE_RUNNER)
    if worker_gaps:
        found["session_run"] = max(0.0, statistics.median(worker_gaps) - found.get("read", 0.0))
    chief_gaps = _gaps(last, first, "enqueue_tokens", "take_gradients", lambda c: c == QUEUE_RUNNER)
    if chief_gaps:
        found["queue_runner_run"] = max(0.0, statistics.median(chief_gaps))
    return {key: round(max(0.0, value), 9) for key, value in found.items()}


def _gaps(
    last: dict[tuple[str, int, str], float],
    first: dict[tuple[str, int, str], float],
    ended: str,
    began: str,
    clients: Callable[[str], bool],
) -> list[float]:
    """Per client that ``clients`` admits, from the end of its ``ended`` op in each run to
    the start of its ``began`` op in the next."""
    return [
        first[client, step + 1, began] - end
        for (client, step, kind), end in last.items()
        if kind == ended and clients(client) and (client, step + 1, began) in first
    ]


def cluster_costs(
    *, refresh: bool = False, on_progress: Callable[[str], None] | None = None
) -> dict[str, float]:
    """This machine's cluster costs (:func:`costs_of` of the reference cluster): the cached
    ones, or measured now (a reference cluster, about a minute) and cached."""
    from simsync.tf_backend.profile.machine import cache_dir, kept, machine_key, profile_path

    key = machine_key()
    path = cache_dir() / _FOLDER / profile_path(key).name

    def measure() -> dict[str, float]:
        costs = _measure(on_progress)
        write_text(path, json.dumps({"version": _VERSION, "machine": key, "costs": costs}))
        return costs

    return kept(
        path,
        "this machine's cluster costs",
        None if refresh else lambda: _cached(path, key),
        measure,
        f"measuring this machine's cluster costs once, about a minute (kept in {path.parent})",
        on_progress,
    )


def _cached(path: Path, key: dict[str, Any]) -> dict[str, float] | None:
    if not path.exists():
        return None
    try:
        data = read_json(path, "cluster costs")
    except Exception:  # an unreadable cache is measured again and replaced
        return None
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return None
    costs = data.get("costs")
    if data.get("machine") != key or not isinstance(costs, dict):
        return None
    if not all(isinstance(v, int | float) and 0 <= v < 10 for v in costs.values()):
        return None
    return {str(k): float(v) for k, v in costs.items()}


def time_between_applies(trace: Trace) -> float:
    """Mean time between the queue runner's applies after the first (which includes the
    start-up round), of a trace real or simulated; 0 with fewer than two."""
    runs = sorted(s.end for s in trace.steps if s.client == QUEUE_RUNNER)
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    return statistics.fmean(gaps) if gaps else 0.0


def priced(scenario: Scenario, costs: dict[str, float], cores: int, efficiency: float) -> Scenario:
    """``scenario`` as a cluster of one machine runs it: every task a process on its
    ``cores`` (busy ones at ``efficiency``), the pattern's ops at ``costs``."""
    cluster = dataclasses.replace(scenario.cluster, host_cores=cores, core_efficiency=efficiency)
    return dataclasses.replace(scenario, cluster=cluster, costs={**scenario.costs, **costs})


def _reference_scenario(config: Any) -> Scenario:
    """The reference cluster as a scenario (its model, workers and R; no compute)."""
    from simsync.scenario import ClusterConfig, ComputeConfig, TrainingConfig
    from simsync.tf_backend.profile.machine import REFERENCE

    return Scenario(
        "cluster reference",
        cluster=ClusterConfig(config.workers),
        compute=ComputeConfig("constant", 1e-6),
        model=REFERENCE.model,
        training=TrainingConfig(mode="sync_replicas", replicas_to_aggregate=config.replicas),
    ).with_run(steps=config.steps)


def _measure(on_progress: Callable[[str], None] | None) -> dict[str, float]:
    """Run the reference cluster and price its trace. Part of a run's time outside its ops
    waits on the other processes (gRPC) and part takes a core; both overheads are scaled
    together so that the reference simulated on this machine's cores takes its measured
    time between applies."""
    from simsync.patterns import build
    from simsync.simulation import simulate
    from simsync.simulation.calibrate import machine_profile, solve
    from simsync.tf_backend.cluster import run_sync_replicas_cluster
    from simsync.tf_backend.cluster.trace import cluster_trace

    config = reference_config()
    scenario = _reference_scenario(config)
    graph = build(scenario)
    real = run_sync_replicas_cluster(config, on_progress=on_progress)
    trace = cluster_trace(real, graph)
    costs = costs_of(trace, {op.name: op.kind for op in graph.ops()})
    profile = machine_profile(on_progress=on_progress)
    cores = profile.host_cores or os.cpu_count() or 1
    overheads = ("session_run", "queue_runner_run")

    def between(scale: float) -> float:
        scaled = {**costs, **{k: costs[k] * scale for k in overheads if k in costs}}
        changed = priced(scenario, scaled, cores, profile.core_efficiency)
        return time_between_applies(simulate(changed, numerics=False).trace)

    scale = solve(between, time_between_applies(trace), 0.05, 2.0)
    costs.update({k: round(costs[k] * scale, 9) for k in overheads if k in costs})
    costs["overhead_scale"] = scale
    return costs
