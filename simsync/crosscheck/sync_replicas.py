"""Cross-check of SyncReplicasOptimizer against the real optimizer on a real cluster.

The simulator's ``sync_replicas`` graph is checked against TensorFlow's own
``tf.compat.v1.train.SyncReplicasOptimizer`` running on parameter-server and worker processes
(:mod:`simsync.tf_backend.cluster`), each worker computing for the simulator's own draws:

1. **Structure.** The protocol's happens-before relations, checked on the real trace: every
   push of a worker's run before its dequeue of a token; every take before its variable's
   update, every update before the global step moves, the global step before the tokens.
   (Inside a worker, TensorFlow's own forward and backward nodes interleave freely: only the
   protocol's ops are units there.)
2. **Values.** The real ledger (which gradients each take averaged, which versions each run
   read) replayed per variable through the numpy model (:mod:`simsync.replay`, the replay
   the simulator itself uses) must give TensorFlow's parameters and losses.
3. **Protocol.** One apply per global step; gradients pushed, accepted and dropped, predicted
   against measured (which gradients are dropped depends on the race, so these are
   predictions).
4. **Timing.** The mean time between applies, predicted against measured.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from simsync.crosscheck.compare import VALUE_TOLERANCE, CrossCheck, relative_error, structure
from simsync.crosscheck.pricing import priced, time_between_applies
from simsync.crosscheck.report import (
    ProtocolSide,
    ReplicaValues,
    SyncReplicasReport,
    SyncReplicasTiming,
)
from simsync.draws import DrawStreams
from simsync.errors import UsageError
from simsync.files import InputError, read_json
from simsync.ir import Graph, counter_readers, run_order, updating_clients
from simsync.kinds import kind_of
from simsync.replay import replay
from simsync.scenario import Scenario
from simsync.simulation import simulate
from simsync.trace import GradientCounts, Trace, gradient_stats
from simsync.words import plural

__all__ = ["crosscheck_sync_replicas", "needs_cluster"]

#: Runs of compute time prepared per worker, as a multiple of the global steps (a worker whose
#: gradients are dropped runs more often than there are steps).
RUNS_PER_STEP = 3


def needs_cluster(graph: Graph) -> bool:
    """Whether ``graph`` runs only on a real cluster (some kind has no one-session lowering)."""
    return any(kind_of(op.kind).lower is None for op in graph.ops())


def crosscheck_sync_replicas(
    scenario: Scenario,
    graph: Graph,
    *,
    open_ports: bool = False,
    cluster_file: str | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> CrossCheck:
    """Run ``scenario`` (its graph ``graph``) on a real cluster and in the simulator, and
    compare them."""
    from simsync.tf_backend.cluster import run_sync_replicas_cluster
    from simsync.tf_backend.cluster.trace import cluster_trace

    config = _cluster_config(scenario, graph, open_ports, cluster_file)
    real = run_sync_replicas_cluster(config, on_progress=on_progress)
    trace = cluster_trace(real, graph)
    pricing = None if cluster_file is not None else _priced(scenario, on_progress)
    simulation = simulate(scenario, graph=graph) if pricing is None else simulate(pricing[0])
    protocol_ops = {op.name for op in graph.ops() if kind_of(op.kind).action or op.writes}
    runs = [(s.client, s.step) for s in trace.steps]
    report: SyncReplicasReport = {
        "check": "cluster",
        "scenario": scenario.name,
        "mode": graph.facts.mode,
        "steps": scenario.run.steps,
        "workers": scenario.towers,
        "replicas_to_aggregate": config.replicas_to_aggregate,
        "devices": f"{plural(config.parameter_servers, 'parameter server')} and "
        f"{plural(config.workers, 'worker')} as separate processes"
        + (" in a private loopback-only network" if real.namespace else ", ports open"),
        "tensorflow": real.tensorflow,
        "cluster": {
            "parameter_servers": config.parameter_servers,
            "workers": config.workers,
            "addresses": real.addresses,
            "private_network": real.namespace,
            "start_seconds": real.start_seconds,
        },
        "structure": {**structure(graph, trace, runs, protocol_ops), "runs": len(runs)},
        "values": _values(graph, trace, scenario),
        "protocol": {
            "predicted": _protocol(simulation.trace, graph, scenario.run.steps),
            "measured": _protocol(trace, graph, real.global_step),
        },
        "timing": _timing(simulation.trace, trace),
    }
    if pricing is not None:
        unpriced = simulate(scenario, numerics=False)
        cluster = pricing[0].cluster
        report["timing"]["priced"] = {
            "costs": pricing[1],
            "host_cores": cluster.host_cores or 1,
            "core_efficiency": cluster.core_efficiency,
            "unpriced_step_time": time_between_applies(unpriced.trace),
        }
    return CrossCheck(scenario, scenario, simulation, real, report)


def _cluster_config(
    scenario: Scenario, graph: Graph, open_ports: bool, cluster_file: str | None
) -> Any:
    """The cluster run of ``scenario``: one parameter server, its workers, R and the initial
    tokens, and every worker's compute time per run from the simulator's own draws."""
    from simsync.tf_backend.cluster import ClusterRunConfig, ModelWorkload

    work = []
    for index, client in enumerate(graph.clients):
        scope = client.name + "/"
        groups = {op.cost.group: op.cost for op in graph.ops()
                  if op.cost.group is not None and op.name.startswith(scope)}  # fmt: skip
        if not groups:
            continue
        speed = graph.devices[next(op.device for op in graph.ops()
                                   if op.cost.group in groups)].speed  # fmt: skip
        streams = DrawStreams(scenario.run.seed, index, groups)
        runs = RUNS_PER_STEP * scenario.run.steps + 5
        work.append(tuple(sum(streams.step(s).values()) / speed for s in range(runs)))
    addresses = None if cluster_file is None else _addresses(cluster_file)
    replicas, tokens = graph.facts.replicas_to_aggregate, graph.facts.init_tokens
    if replicas is None or tokens is None:  # a graph of queues and accumulators of its own
        raise UsageError(
            f"{scenario.name}: only a scenario of SyncReplicasOptimizer's training is run on a "
            "real cluster: this graph's queues and accumulators were built another way"
        )
    return ClusterRunConfig(
        ModelWorkload(scenario.model),
        workers=scenario.towers,
        replicas_to_aggregate=replicas,
        init_tokens=tokens,
        steps=scenario.run.steps,
        seed=scenario.run.seed,
        work_seconds=tuple(work),
        open_ports=open_ports,
        cluster=addresses,
    )


def _addresses(cluster_file: str) -> Any:
    """The hosts ``--cluster`` names: a ClusterSpec as JSON or a whole ``TF_CONFIG``."""
    from simsync.tf_backend import BackendError
    from simsync.tf_backend.cluster import ClusterAddresses

    try:
        return ClusterAddresses.from_data(read_json(cluster_file, "cluster file"))
    except InputError as error:
        problem = str(error)
    except BackendError as error:
        problem = f"{cluster_file}: {error}"
    raise UsageError(
        f"{problem}; expected a ClusterSpec as JSON "
        '({"ps": ["host:port"], "worker": ["host:port", ...]}) or a TF_CONFIG'
    )


def _values(graph: Graph, trace: Trace, scenario: Scenario) -> ReplicaValues:
    """The real ledger replayed through numpy, against TensorFlow's parameters and losses."""
    replayed = replay(graph, trace, scenario.model, scenario.run.seed)
    diff = max(
        float(np.max(np.abs(replayed.params[name] - value))) for name, value in trace.params.items()
    )
    losses = [
        abs(replayed.losses[s.client, s.step] - s.loss)
        for s in trace.steps
        if s.loss is not None and (s.client, s.step) in replayed.losses
    ]
    loss_diff = max(losses, default=0.0)
    return {
        "compared": [*sorted(trace.params), "loss of every worker run"],
        "max_abs_diff": diff,
        "loss_max_abs_diff": loss_diff,
        "tolerance": VALUE_TOLERANCE,
        "ok": diff <= VALUE_TOLERANCE and loss_diff <= VALUE_TOLERANCE,
    }


def _protocol(trace: Trace, graph: Graph, global_step: int) -> ProtocolSide:
    """The global step reached, the applies that ran, whether each step applied every
    variable exactly once, and the gradients, of one trace (simulated or real)."""
    updating = set(updating_clients(graph))
    per_run: dict[tuple[str, int], list[str]] = defaultdict(list)
    for update in trace.updates:
        if update.client in updating and update.applied:
            per_run[update.client, update.step].append(update.op)
    applying = sorted(  # the ops that write, in a run of a client that updates the model
        {name for client in graph.clients if client.name in updating
         for name in run_order(graph, client.fetches) if graph.op(name).writes}
    )  # fmt: skip
    gradients = gradient_stats(trace, counter_readers(graph))
    return {
        "global_step": global_step,
        "applies": len(per_run),
        "one_apply_per_step": len(per_run) == global_step
        and all(sorted(ops) == applying for ops in per_run.values()),
        "gradients": GradientCounts(
            pushed=gradients["pushed"] if gradients else 0,
            accepted=gradients["accepted"] if gradients else 0,
            dropped=gradients["dropped"] if gradients else 0,
            split=gradients["split"] if gradients else 0,
        ),
        "dropped_per_step": gradients["dropped_per_step"] if gradients else None,
    }


def _priced(
    scenario: Scenario, on_progress: Callable[[str], None] | None
) -> tuple[Scenario, dict[str, float]]:
    """``scenario`` as a cluster of this machine runs it (:func:`~simsync.crosscheck.
    pricing.priced`): every task a process on its cores (the machine's profile: how many,
    how busy ones slow each other), the pattern's ops at the costs a reference cluster
    measured here (:func:`~simsync.crosscheck.pricing.cluster_costs`)."""
    from simsync.crosscheck.pricing import cluster_costs
    from simsync.simulation.calibrate import machine_profile

    profile = machine_profile(on_progress=on_progress)
    costs = cluster_costs(on_progress=on_progress)
    cores = profile.host_cores or os.cpu_count() or 1
    ops = {k: v for k, v in costs.items() if k != "overhead_scale"}
    return priced(scenario, ops, cores, profile.core_efficiency), costs


def _timing(simulated: Trace, real: Trace) -> SyncReplicasTiming:
    """Mean time between applies after the first (which includes the start-up round)."""
    predicted, measured = time_between_applies(simulated), time_between_applies(real)
    return {
        "predicted_step_time": predicted,
        "measured_step_time": measured,
        "error": relative_error(predicted, measured),
    }
