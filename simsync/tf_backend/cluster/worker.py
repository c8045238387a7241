"""A worker task: its training loop, and on the chief also the queue runner, all traced.

Every ``sess.run`` of a worker and every ``sync_op`` of the chief's queue runner runs with
``FULL_TRACE`` and a deadline (``RunOptions(timeout_in_ms=...)``), so none can hang. Each run
leaves a record (plain JSON data): its wall-clock start and end, the local step its gradients
were pushed with, the token it dequeued, the loss, the gradients it pushed, the values it read,
and every node's timing from ``RunMetadata.step_stats`` ``[device, node, start_us, end_us]``,
which include the parameter servers' kernels (pushes, takes, queue ops) on their own clock.

The chief does what TensorFlow's ``_SyncReplicasOptimizerHook`` does: initialise the variables,
run ``chief_init_op`` (local step and every accumulator's step from ``global_step``) and
``get_init_tokens_op``, then start the queue runner. simsync runs the queue runner's own
``enqueue_ops`` (``[sync_op]``) in a thread, as ``QueueRunner`` does, rather than
``QueueRunner.create_threads``: so each ``sync_op`` run can be traced, can fetch the averages
its takes returned, and can stop after a given number of global steps without closing the token
queue under the workers. Other workers run ``local_step_init_op``, as the hook does.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import numpy as np

from simsync.numerics import make_batch
from simsync.tf_backend.cluster.channel import Channel
from simsync.tf_backend.cluster.config import ClusterAddresses, ClusterRunConfig, ModelWorkload
from simsync.tf_backend.cluster.graph import WorkerGraph, build_worker_graph, node_roles
from simsync.tf_backend.cluster.server import reason, server_config
from simsync.tf_backend.session.runtime import BackendError
from simsync.tf_backend.session.step_stats import read_step_stats
from simsync.tf_backend.session.work import measure_seconds_per_row, rows_for

__all__ = ["FAULT", "WorkerTask", "jsonable", "node_timings"]

#: ``"worker:1:3"`` makes worker 1 kill itself (SIGKILL) after its third run: a real task dying
#: mid-run, for tests of the error paths.
FAULT = "SIMSYNC_CLUSTER_FAULT"


def jsonable(value: Any) -> Any:
    """Fetched values as JSON data (float64 values survive the trip exactly)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value


def node_timings(metadata: Any) -> list[list[Any]]:
    """Every traced node execution, once (on a GPU timed by its kernels, see
    :mod:`simsync.tf_backend.session.step_stats`): ``[device, node, start, end]``, in wall-clock
    microseconds."""
    return [
        [node.device, node.name, node.start, node.end]
        for node in read_step_stats(metadata.step_stats).nodes
    ]


class WorkerTask:
    """One worker: start (init, barrier), run (freely or by command), report, end."""

    def __init__(
        self,
        tf: Any,
        config: ClusterRunConfig,
        addresses: ClusterAddresses,
        index: int,
        server: Any,
        channel: Channel,
    ) -> None:
        self.tf, self.config, self.index, self.channel = tf, config, index, channel
        self.chief = index == 0
        channel.progress("building the graph")
        cluster = tf.train.ClusterSpec(addresses.as_dict())
        self.built: WorkerGraph = build_worker_graph(tf, config, cluster, index)
        session_config = server_config(tf, "worker", index)
        session_config.device_filters.extend(["/job:ps", f"/job:worker/task:{index}"])
        self.session = tf.compat.v1.Session(
            server.target, graph=self.built.graph, config=session_config
        )
        self.runs: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {
            "worker": index,
            "runs": self.runs,
            "tensorflow": tf.__version__,
        }
        self.local_step = 0
        self.seconds_per_row = config.seconds_per_row or 0.0
        self.queue_runner: QueueRunnerLoop | None = None
        self.fault = _fault(index)

    def options(self, traced: bool, timeout: float | None = None) -> Any:
        """RunOptions with a deadline (``run_timeout`` unless given) and maybe a full trace."""
        options = self.tf.compat.v1.RunOptions(
            timeout_in_ms=int(1000 * (timeout or self.config.run_timeout))
        )
        if traced:
            options.trace_level = self.tf.compat.v1.RunOptions.FULL_TRACE
        return options

    def call(self, fetches: Any, what: str, timeout: float | None = None, feeds: Any = None) -> Any:
        """One untraced ``sess.run`` whose TensorFlow error becomes one line."""
        try:
            return self.session.run(fetches, feeds, options=self.options(False, timeout))
        except self.tf.errors.DeadlineExceededError:
            raise BackendError(f"timed out {what}") from None
        except self.tf.errors.OpError as error:
            raise BackendError(f"failed {what}: {reason(error)}") from None

    def _stop_parameter_servers(self, puts: list[Any]) -> None:
        """Put a token in every parameter server's shutdown queue. A server that took its
        token may end its process before the answer to the put comes back: the connection
        then closes under the put, which means the server is stopping, not that it failed."""
        try:
            self.session.run(puts, options=self.options(False, None))
        except self.tf.errors.UnavailableError:
            pass  # "Socket closed": the server got its token and went away
        except self.tf.errors.OpError as error:
            raise BackendError(f"failed stopping the parameter servers: {reason(error)}") from None

    def run(self) -> None:
        """The whole life of the worker, from the start barrier to its report."""
        if self.chief:
            self._start_chief()
        else:
            self._start_other()
        self.local_step = int(self.call(self.built.local_step, "reading its local step"))
        self.channel.send("ready", local_step=self.local_step)
        if self.config.schedule is None:
            self._train_freely()
        else:
            self._obey()
        self._finish()

    def _start_chief(self) -> None:
        built, control, config = self.built, self.built.control, self.config
        self.channel.progress("initialising the variables, local step, accumulators and tokens")
        self.call(built.init_op, "initialising the variables")
        self.call(built.local_init_op, "initialising the local variables")
        self.call(built.chief_init_op, "running chief_init_op")
        initial = self.call(built.values, "reading the initial variables")
        global_step = int(self.call(built.global_step, "reading global_step"))
        self.call(built.init_tokens_op, "putting the initial tokens")
        count = config.replicas if config.init_tokens is None else config.init_tokens
        self.report["init_tokens"] = {"time": time.time(), "value": global_step, "count": count}
        self.report["initial_params"] = jsonable(initial)
        if control.others:
            self.call(control.initialised_put, "releasing the other workers")
        if self.seconds_per_row == 0.0 and any(s > 0 for r in config.work_seconds for s in r):
            self.channel.progress("measuring the speed of the work op")
            local = server_config(self.tf, "worker", self.index)
            # where the work runs: the worker's one visible GPU, if it has one
            device = "/device:GPU:0" if local.gpu_options.visible_device_list else "/cpu:0"
            measure = measure_seconds_per_row(self.tf, local, device)
            self.seconds_per_row = measure
        self.channel.progress("waiting for every worker at the start barrier")
        if control.others:
            self.call(control.armed_get, "waiting for the other workers", config.start_timeout)
        base = time.time()
        stop_after = config.steps if config.schedule is None else None
        self.queue_runner = QueueRunnerLoop(self, stop_after)
        self.queue_runner.start()
        if control.others:
            values = {control.go_values: [base, self.seconds_per_row]}
            self.call(control.go_put, "starting the other workers", feeds=values)
        self.report.update(base=base, seconds_per_row=self.seconds_per_row)

    def _start_other(self) -> None:
        control, timeout = self.built.control, self.config.start_timeout
        self.channel.progress("waiting for the chief to initialise the model")
        self.call(control.initialised_get, "waiting for the chief's initialisation", timeout)
        self.call(self.built.local_init_op, "initialising the local variables")
        self.call(self.built.local_step_init_op, "running local_step_init_op")
        self.call(control.armed_put, "arriving at the start barrier")
        self.channel.progress("waiting for every worker at the start barrier")
        base, seconds_per_row = self.call(control.go_get, "waiting at the start barrier", timeout)
        self.seconds_per_row = float(seconds_per_row)
        self.report.update(base=float(base), seconds_per_row=self.seconds_per_row)

    def _train_freely(self) -> None:
        """Run until a token of the last global step (``steps``) or more comes back."""
        config = self.config
        tokens = max(config.workers, config.replicas)
        limit = (config.steps + 2) * tokens + (config.init_tokens or config.replicas) + 10
        while True:
            record = self.train_once()
            if record["token"] >= config.steps:
                return
            if len(self.runs) >= limit:
                raise BackendError(
                    f"ran {limit} times without seeing global step {config.steps}: stuck"
                )

    def _obey(self) -> None:
        """Follow the parent's commands (``run``, ``settle``, ``observe``) until ``finish``."""
        while True:
            command = self.channel.command()
            kind = command["command"]
            if kind == "finish":
                return
            if kind == "run":
                record = self.train_once()
                self.channel.send("ran", step=record["step"], token=record["token"])
            elif kind == "settle":
                self.channel.send("settled", global_step=self._settle(command["global_step"]))
            elif kind == "observe":
                step, values = self.call((self.built.global_step, self.built.values), "observing")
                self.channel.send("observed", global_step=int(step), params=jsonable(values))

    def _settle(self, target: int) -> int:
        deadline = time.monotonic() + self.config.run_timeout
        while (step := int(self.call(self.built.global_step, "reading global_step"))) < target:
            if time.monotonic() > deadline:
                raise BackendError(f"global step stayed at {step}, below {target}")
            time.sleep(0.01)
        return step

    def train_once(self) -> dict[str, Any]:
        """One traced run of ``train_op``: push, dequeue a token, set the local step."""
        built, step = self.built, len(self.runs)
        fetches: dict[str, Any] = {
            "train": built.train_op,
            "token": built.token,
            "gradients": built.gradients,
        }
        feeds: dict[Any, Any] = {}
        if isinstance(self.config.workload, ModelWorkload):
            spec = self.config.workload.spec
            batch = make_batch(spec, self.config.seed, (self.index, step, 0))
            seconds = self.config.work(self.index, step)
            rows = rows_for(seconds, self.seconds_per_row) if seconds > 0 else 0
            feeds = {built.feeds["x"]: batch.x, built.feeds["y"]: batch.y}
            feeds[built.feeds["rows"]] = rows
            fetches.update(loss=built.loss, reads=built.values)
        metadata = self.tf.compat.v1.RunMetadata()
        start = time.time()
        try:
            out = self.session.run(fetches, feeds, self.options(True), metadata)
        except self.tf.errors.DeadlineExceededError:
            raise BackendError(
                f"run {step} waited more than {self.config.run_timeout:g} s (run_timeout)"
            ) from None
        except self.tf.errors.OpError as error:
            raise BackendError(f"run {step} failed: {reason(error)}") from None
        record = {
            "step": step,
            "start": start,
            "end": time.time(),
            "local_step": self.local_step,
            "token": int(out["token"]),
            "loss": float(out["loss"]) if "loss" in out else None,
            "gradients": jsonable(out["gradients"]),
            "reads": jsonable(out.get("reads", {})),
            "nodes": node_timings(metadata),
        }
        self.runs.append(record)
        self.local_step = record["token"]
        if self.fault is not None and len(self.runs) >= self.fault:
            os.kill(os.getpid(), signal.SIGKILL)
        return record

    def _finish(self) -> None:
        """Say so (others) or wait for everyone, read the end state and stop the parameter
        servers (chief); then send the report. The process ends after it (task)."""
        built, control = self.built, self.built.control
        self.report["local_step"] = int(self.call(built.local_step, "reading its local step"))
        self.report["roles"] = node_roles(built)
        if not self.chief:
            self.call(control.finished_put, "saying it has finished")
            self.channel.send("report", report=self.report)
            return
        runner = self.queue_runner
        assert runner is not None
        if self.config.schedule is None:
            runner.join(self.config.run_timeout)
            if runner.is_alive():
                raise BackendError("the queue runner did not finish its last sync_op")
            if runner.error is not None:
                raise BackendError(f"the queue runner failed: {runner.error}")
        if control.others:
            self.call(control.finished_get, "waiting for the other workers to finish")
        step, values = self.call((built.global_step, built.values), "reading the final state")
        runner.finishing = True
        self.report.update(
            global_step=int(step),
            params=jsonable(values),
            dtypes={n: v.dtype.base_dtype.name for n, v in built.variables.items()},
            queue_runner=list(runner.runs),
        )
        self._stop_parameter_servers(control.shutdown_puts)
        self.channel.send("report", report=self.report)


class QueueRunnerLoop(threading.Thread):
    """The chief's queue runner: ``sync_op`` again and again (``stop_after`` times, or until
    the process ends), each run traced, fetching what its takes averaged and its tokens."""

    def __init__(self, task: WorkerTask, stop_after: int | None) -> None:
        super().__init__(name="queue_runner", daemon=True)
        self.task, self.stop_after = task, stop_after
        self.runs: list[dict[str, Any]] = []
        self.error: str | None = None
        self.finishing = False

    def run(self) -> None:
        task, built = self.task, self.task.built
        fetches = {"sync": built.sync_op, "takes": built.takes, "tokens": built.tokens_enqueued}
        # A schedule may leave sync_op waiting for pushes between rounds for as long as the
        # parent takes: then only the end of the chief's process bounds it (a year here).
        unbounded = 365 * 24 * 3600.0
        options = task.options(True, unbounded if self.stop_after is None else None)
        while self.stop_after is None or len(self.runs) < self.stop_after:
            metadata = task.tf.compat.v1.RunMetadata()
            start = time.time()
            try:
                out = task.session.run(fetches, options=options, run_metadata=metadata)
            except Exception as error:
                if not self.finishing:
                    self.error = f"sync_op run {len(self.runs) + 1}: {reason(error)}"
                return
            self.runs.append(
                {
                    "step": len(self.runs) + 1,
                    "start": start,
                    "end": time.time(),
                    "takes": jsonable(out["takes"]),
                    "tokens": jsonable(out["tokens"]),
                    "nodes": node_timings(metadata),
                }
            )


def _fault(index: int) -> int | None:
    job, _, rest = os.environ.get(FAULT, "").partition(":")
    worker, _, runs = rest.partition(":")
    if job == "worker" and worker == str(index) and runs.isdigit():
        return int(runs)
    return None
