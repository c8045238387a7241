"""One task of a cluster, in its own process: a parameter server or a worker.

``python -m simsync.tf_backend.cluster_task --config CONFIG.json --job worker --index 1``
runs one task. The launcher starts every task this way on one host; on several hosts, run it
once per task on each host with the same config, its ``cluster`` naming every address (or
``--addresses`` / ``TF_CONFIG``). Messages are JSON lines, one object each, written to
``--messages-fd`` (default: stdout); commands (only for a schedule) come from
``--commands-fd``. Messages carry a ``kind``:

- ``progress`` (``text``): what the task is doing, for the person waiting;
- ``listening`` (``pid``, ``address``): the server is up;
- ``ready``: a worker passed the start barrier;
- ``ran``, ``settled``, ``observed``: answers to commands (see :mod:`cluster_worker`);
- ``report`` (``report``): a worker's whole record, its last message;
- ``done``: a parameter server was told to stop by the chief (its last message);
- ``error`` (``text``): one line saying what went wrong; the task then exits with status 1.

A task ends its own process (``os._exit``) after its last message: TensorFlow's Python server
has no ``stop()``, and its C++ ``Stop`` is not implemented.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from simsync.tf_backend.cluster_config import ClusterAddresses, ClusterConfig
from simsync.tf_backend.cluster_launch import die_with_parent
from simsync.tf_backend.gpus import (
    gpu_memory_error,
    task_environment,
    worker_gpu,
    workers_on_gpus,
)
from simsync.tf_backend.runtime import BackendError

__all__ = ["Channel", "main", "reason", "server_config"]


class Channel:
    """JSON lines out (messages) and in (commands) over two file descriptors."""

    def __init__(self, messages_fd: int, commands_fd: int | None) -> None:
        self._out = os.fdopen(messages_fd, "w", buffering=1)
        self._in = os.fdopen(commands_fd, "r") if commands_fd is not None else None
        self._lock = threading.Lock()

    def send(self, kind: str, **fields: Any) -> None:
        """One message; safe from several threads (one line each)."""
        with self._lock:
            self._out.write(json.dumps({"kind": kind, **fields}) + "\n")
            self._out.flush()

    def progress(self, text: str) -> None:
        self.send("progress", text=text)

    def command(self) -> dict[str, Any]:
        """The next command; a closed pipe reads as ``finish``."""
        if self._in is None:
            raise BackendError("a schedule needs a command pipe (--commands-fd)")
        line = self._in.readline()
        return json.loads(line) if line else {"command": "finish"}


_NOT_THE_REASON = ("Graph execution error", "Detected at node", "Node:", "From /job", "Additional")


def reason(error: BaseException) -> str:
    """The line of a TensorFlow error that says what went wrong (its message starts with
    "Graph execution error:" and where the node was defined).

    >>> reason(RuntimeError("Graph execution error:\\n\\nNode: 'x'\\nYou must feed x"))
    'You must feed x'
    """
    message = getattr(error, "message", None) or str(error)
    for line in message.splitlines():
        if line.strip() and not line[0].isspace() and not line.startswith(_NOT_THE_REASON):
            return line.strip()
    return type(error).__name__


def server_config(tf: Any, job: str, index: int) -> Any:
    """The ConfigProto of every server and session of a task: no graph rewriting, neither
    grappler nor the classic constant folding (every node keeps its name in the traces), one
    thread per op, as many ops as cores at once; a worker sees only its GPU
    (:func:`~simsync.tf_backend.gpus.worker_gpu`) and takes its memory as it needs it."""
    config = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=os.cpu_count() or 1, intra_op_parallelism_threads=1
    )
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    config.graph_options.optimizer_options.do_constant_folding = False
    gpu = (
        worker_gpu(index, len(tf.config.list_physical_devices("GPU"))) if job == "worker" else None
    )
    if gpu is not None:
        config.gpu_options.visible_device_list = str(gpu)
        config.gpu_options.allow_growth = True
    return config


def _start_server(tf: Any, addresses: ClusterAddresses, job: str, index: int) -> Any:
    spec = tf.train.ClusterSpec(addresses.as_dict())
    address = (addresses.ps if job == "ps" else addresses.worker)[index]
    config = server_config(tf, job, index)
    try:
        return tf.distribute.Server(spec, job_name=job, task_index=index, config=config, start=True)
    except tf.errors.OpError as error:
        why = reason(error)
        if gpu_memory_error(why):
            raise BackendError(f"could not start: its GPU is out of memory ({why})") from None
        raise BackendError(
            f"could not start its server on {address} (is the port taken?): {why}"
        ) from None


def _serve_parameters(tf: Any, config: ClusterConfig, server: Any, index: int) -> None:
    """A parameter server serves until the chief puts a token in its shutdown queue."""
    from simsync.tf_backend.cluster_graph import shutdown_queue

    graph = tf.Graph()
    with graph.as_default():
        done = shutdown_queue(tf, index).dequeue()
    session_config = server_config(tf, "ps", index)
    session_config.device_filters.append(f"/job:ps/task:{index}")
    options = tf.compat.v1.RunOptions(timeout_in_ms=1000)
    with tf.compat.v1.Session(server.target, graph=graph, config=session_config) as session:
        while True:
            try:
                session.run(done, options=options)
                return
            except tf.errors.DeadlineExceededError:
                continue


def run_task(args: argparse.Namespace, channel: Channel) -> None:
    """Start the task's server, then serve (ps) or train (worker)."""
    from simsync.tf_backend.runtime import load_tensorflow

    config = ClusterConfig.from_json(Path(args.config).read_text())
    addresses = _addresses(args, config)
    channel.progress("importing TensorFlow")
    tf = load_tensorflow()
    server = _start_server(tf, addresses, args.job, args.index)
    gpus = len(tf.config.list_physical_devices("GPU"))
    gpu = worker_gpu(args.index, gpus) if args.job == "worker" else None
    if gpu is not None:
        channel.progress(f"on GPU {gpu} ({workers_on_gpus(config.workers, gpus)})")
    address = (addresses.ps if args.job == "ps" else addresses.worker)[args.index]
    channel.send("listening", pid=os.getpid(), address=address)
    if args.job == "ps":
        _serve_parameters(tf, config, server, args.index)
        channel.send("done")
        return
    from simsync.tf_backend.cluster_worker import WorkerTask

    WorkerTask(tf, config, addresses, args.index, server, channel).run()


def _addresses(args: argparse.Namespace, config: ClusterConfig) -> ClusterAddresses:
    if args.addresses:
        data = json.loads(args.addresses)
        return ClusterAddresses(tuple(data["ps"]), tuple(data["worker"]))
    if config.cluster is not None:
        return config.cluster
    if "TF_CONFIG" in os.environ:
        return ClusterAddresses.from_tf_config(os.environ["TF_CONFIG"])
    raise BackendError("no cluster addresses: give --addresses, the config's cluster or TF_CONFIG")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m simsync.tf_backend.cluster_task")
    parser.add_argument("--config", required=True, help="a ClusterConfig as JSON (to_json)")
    parser.add_argument("--job", required=True, choices=["ps", "worker"])
    parser.add_argument("--index", required=True, type=int)
    parser.add_argument("--addresses", help='{"ps": [...], "worker": [...]} as JSON')
    parser.add_argument("--messages-fd", type=int, default=1)
    parser.add_argument("--commands-fd", type=int, default=None)
    parser.add_argument("--parent", type=int, default=None, help="die when this process ends")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run one task; always ends the process (status 0 after its last message, else 1)."""
    args = _arguments(argv)
    os.environ.update(task_environment(args.job))  # before TensorFlow starts
    if args.parent is not None:
        die_with_parent(args.parent)
    channel = Channel(args.messages_fd, args.commands_fd)
    status = 0
    try:
        run_task(args, channel)
    except BackendError as error:
        channel.send("error", text=str(error))
        status = 1
    except KeyboardInterrupt:
        status = 130
    except Exception as error:  # anything TensorFlow raises, as one line
        traceback.print_exc()  # into the task's log, for whoever debugs simsync
        channel.send("error", text=f"{type(error).__name__}: {reason(error)}")
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
