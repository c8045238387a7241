"""TensorFlow's real ``SyncReplicasOptimizer`` on a real parameter-server cluster, with its ledger.

Problem: the simulator predicts what ``SyncReplicasOptimizer`` does (who waits for which token,
which gradients are dropped as stale, one apply per global step). To check it, simsync runs the
real optimizer on a real cluster on this machine and records what really happened.

State created, per run: one OS process per task (``P`` parameter servers, ``N`` workers, worker
0 the chief), each a ``tf.distribute.Server`` of one ClusterSpec, all inside one private
network namespace that has only loopback (see :mod:`namespace`); a small launcher
process that started them; a temporary directory with the config and the tasks' logs.

Protocol:

1. check that a private namespace can be made here (or that ``open_ports`` was given);
2. start the launcher, which picks the ports and starts the tasks; wait until every server
   listens (each task imports TensorFlow: tens of seconds on two cores), reporting progress;
3. the tasks build their graphs and meet at a start barrier (queues on ps 0): the chief
   initialises everything first, as TensorFlow's ``_SyncReplicasOptimizerHook`` does, and
   releases everyone at once; the moment of release is the time base of the whole ledger;
4. the workers train freely until the global step reaches ``steps``, or follow the
   ``schedule`` round by round, every run traced;
5. every worker reports, the chief stops the parameter servers, every task ends its process;
   any failure or Ctrl-C ends every process still running, by pid;
6. the ledger is rebuilt and checked (:mod:`ledger`).

Usage::

    from simsync.numerics import ModelSpec
    from simsync.tf_backend.cluster import ClusterRunConfig, ModelWorkload
    from simsync.tf_backend.cluster import run_sync_replicas_cluster

    config = ClusterRunConfig(ModelWorkload(ModelSpec()), workers=3, replicas_to_aggregate=2,
                              steps=12)
    run = run_sync_replicas_cluster(config, on_progress=print)
    run.events(action="push")       # every gradient pushed, accepted or dropped
    run.params, run.global_step     # TensorFlow's final state
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simsync.tf_backend.cluster.config import ClusterRunConfig
from simsync.tf_backend.cluster.ledger import Ledger, build_ledger
from simsync.tf_backend.cluster.namespace import namespace_available
from simsync.tf_backend.cluster.processes import ClusterProcesses, StartedCluster
from simsync.tf_backend.session.runtime import BackendError
from simsync.trace import ResourceEvent

__all__ = ["ClusterRun", "Observation", "run_sync_replicas_cluster"]


@dataclass(frozen=True)
class Observation:
    """The state after round ``round`` of a schedule (numbered from 0)."""

    round: int
    global_step: int
    params: dict[str, np.ndarray]
    local_steps: dict[str, int]  # "worker_0" -> its local step (the last token it got)


@dataclass(kw_only=True)
class ClusterRun(Ledger):
    """A cluster run's real ledger (the fields of :class:`Ledger`) and end state.

    ``trace`` holds a :class:`~simsync.trace.StepRecord` per worker run and per ``sync_op``
    run (client ``queue_runner``, step k = the run that made global step k), and the
    :class:`~simsync.trace.ResourceEvent` s in time order; times are seconds from the start
    barrier. ``nodes`` are every traced TensorFlow node. ``read_versions[(client, step)]``
    gives, per variable, the global step whose value that run read (model workload; -1: none).
    ``pending`` counts accepted gradients no take consumed, per variable. ``pushed`` keeps each
    run's gradients as pushed (JSON data). ``start_seconds``: from launch to the start barrier;
    ``run_seconds``: from the barrier to the last report."""

    config: ClusterRunConfig
    observations: list[Observation]
    addresses: dict[str, list[str]]
    namespace: bool
    pids: dict[str, int]
    seconds_per_row: float
    start_seconds: float
    run_seconds: float
    tensorflow: str = field(default="")

    def events(
        self, resource: str | None = None, action: str | None = None, client: str | None = None
    ) -> list[ResourceEvent]:
        """The ledger's events, filtered by resource, action and client (None: any)."""
        return [
            e
            for e in self.trace.resources
            if (resource is None or e.resource == resource)
            and (action is None or e.action == action)
            and (client is None or e.client == client)
        ]


def run_sync_replicas_cluster(
    config: ClusterRunConfig,
    on_progress: Callable[[str], None] | None = None,
    on_start: Callable[[StartedCluster], None] | None = None,
) -> ClusterRun:
    """Run ``config`` on a real cluster of this machine; return its checked ledger.

    ``on_progress`` receives one line at a time while the tasks start and run; ``on_start``
    is called once every server listens, with the processes and their addresses.

    Raises :class:`~simsync.tf_backend.session.runtime.BackendError` (one line) when no private
    network namespace can be made and ``open_ports`` is not set (no process is started);
    :class:`ClusterError` when a task fails, dies or times out (every process it started is
    ended first; ``error.pids`` names them); :class:`LedgerError` when the records do not
    determine one exact ledger.
    """
    progress = on_progress or (lambda message: None)
    namespace = _check_isolation(config)
    workdir = Path(tempfile.mkdtemp(prefix="simsync-cluster-"))
    processes = ClusterProcesses(config, workdir, namespace, progress)
    launched = time.monotonic()
    try:
        where = "in a private network namespace" if namespace else "with open ports"
        progress(f"starting {config.parameter_servers} parameter server(s) and "
                 f"{config.workers} worker(s) {where}")  # fmt: skip
        processes.start()
        what = "starting the tasks (each imports TensorFlow)"
        processes.pump(lambda: processes.all_sent("listening"), config.start_timeout, what)
        if on_start is not None:
            on_start(StartedCluster(dict(processes.pids), processes.addresses, namespace))
        what = "waiting for the workers at the start barrier"
        processes.pump(lambda: processes.all_sent("ready", "worker"), config.start_timeout, what)
        barrier = time.monotonic()
        observations = _follow(processes, config) if config.schedule else []
        reports = _collect(processes, config)
        finished = time.monotonic()
    finally:
        processes.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    ledger = build_ledger(config, reports)
    return ClusterRun(
        **{f.name: getattr(ledger, f.name) for f in dataclasses.fields(ledger)},
        config=config,
        observations=observations,
        addresses=processes.addresses,
        namespace=namespace,
        pids=dict(processes.pids),
        seconds_per_row=float(reports[0]["seconds_per_row"]),
        start_seconds=barrier - launched,
        run_seconds=finished - barrier,
        tensorflow=str(reports[0].get("tensorflow", "")),
    )


def _check_isolation(config: ClusterRunConfig) -> bool:
    """True to run in a private namespace; raise when that is needed but impossible."""
    if config.open_ports:
        return False
    if config.cluster is not None and not config.cluster.loopback_only():
        raise BackendError(
            "a cluster spanning other hosts cannot run in a private network namespace; "
            "pass --open-ports (open_ports=True) to run it anyway (the ports will be open on "
            "all interfaces)"
        )
    why = namespace_available()
    if why is not None:
        raise BackendError(
            f"cannot make a private network namespace here ({why}), and TensorFlow's servers "
            "listen on all interfaces without authentication; pass --open-ports "
            "(open_ports=True) to run anyway (the ports will be open on all interfaces)"
        )
    return True


def _follow(processes: ClusterProcesses, config: ClusterRunConfig) -> list[Observation]:
    """Play the schedule: each round's runs, its settling, then one observation."""
    assert config.schedule is not None
    timeout = config.run_timeout + 10.0
    local_steps = {}
    for worker in range(config.workers):
        (ready,) = [r for r in processes.tasks[f"worker {worker}"].replies if r["kind"] == "ready"]
        local_steps[f"worker_{worker}"] = int(ready["local_step"])
    observations = []
    for number, round_ in enumerate(config.schedule):
        processes.on_progress(f"round {number}: worker(s) {list(round_.workers)} run train_op")
        for position, worker in enumerate(round_.workers):
            if position and round_.stagger:
                processes.wait(round_.stagger)
            processes.send(f"worker {worker}", {"command": "run"})
        for worker in round_.workers:
            ran = processes.reply(f"worker {worker}", "ran", timeout)
            local_steps[f"worker_{worker}"] = int(ran["token"])
        if round_.settle_global_step is not None:
            command = {"command": "settle", "global_step": round_.settle_global_step}
            processes.send("worker 0", command)
            processes.reply("worker 0", "settled", timeout)
        processes.send("worker 0", {"command": "observe"})
        seen = processes.reply("worker 0", "observed", timeout)
        params = {n: np.asarray(v, dtype=np.float64) for n, v in seen["params"].items()}
        observations.append(Observation(number, int(seen["global_step"]), params,
                                        dict(local_steps)))  # fmt: skip
    for worker in range(config.workers):
        processes.send(f"worker {worker}", {"command": "finish"})
    return observations


def _collect(processes: ClusterProcesses, config: ClusterRunConfig) -> dict[int, dict[str, Any]]:
    """Wait for every worker's report and every parameter server's end; return the reports."""
    tasks = processes.tasks

    def complete() -> bool:
        return all(t.report is not None for t in tasks.values() if t.job == "worker") and all(
            t.last == "done" for t in tasks.values() if t.job == "ps"
        )

    if config.schedule is None:
        limit = config.run_timeout * (config.steps + 2) * max(config.workers, config.replicas)
    else:
        limit = config.run_timeout + 30.0
    processes.pump(complete, limit, "waiting for the workers' reports")
    processes.wait_for_exit(10.0)
    reports = {t.index: t.report for t in tasks.values() if t.job == "worker"}
    return {index: report for index, report in reports.items() if report is not None}
