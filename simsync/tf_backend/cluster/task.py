"""One task of a cluster, in its own process: a parameter server or a worker.

``python -m simsync.tf_backend.cluster.task --config CONFIG.json --job worker --index 1``
runs one task. The launcher starts every task this way on one host; on several hosts, run it
once per task on each host with the same config, its ``cluster`` naming every address (or
``--addresses`` / ``TF_CONFIG``). Messages are JSON lines, one object each, written to
``--messages-fd`` (default: stdout); commands (only for a schedule) come from
``--commands-fd``. Messages carry a ``kind``:

- ``progress`` (``text``): what the task is doing, for the person waiting;
- ``listening`` (``pid``, ``address``): the server is up;
- ``ready``: a worker passed the start barrier;
- ``ran``, ``settled``, ``observed``: answers to commands (see :mod:`worker`);
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
import traceback
from typing import Any

from simsync.files import InputError, read_json
from simsync.tf_backend.cluster.channel import Channel
from simsync.tf_backend.cluster.config import ClusterAddresses, ClusterRunConfig
from simsync.tf_backend.cluster.launch import die_with_parent
from simsync.tf_backend.cluster.server import reason, server_config
from simsync.tf_backend.session.gpus import (
    gpu_memory_error,
    task_environment,
    worker_gpu,
    workers_on_gpus,
)
from simsync.tf_backend.session.runtime import BackendError

__all__ = ["main", "run_task"]


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


def _serve_parameters(tf: Any, config: ClusterRunConfig, server: Any, index: int) -> None:
    """A parameter server serves until the chief puts a token in its shutdown queue."""
    from simsync.tf_backend.cluster.graph import shutdown_queue

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
    from simsync.tf_backend.session.runtime import load_tensorflow

    try:
        config = ClusterRunConfig.from_dict(read_json(args.config, "cluster config"))
    except InputError as error:
        raise BackendError(str(error)) from None
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
    from simsync.tf_backend.cluster.worker import WorkerTask

    WorkerTask(tf, config, addresses, args.index, server, channel).run()


def _addresses(args: argparse.Namespace, config: ClusterRunConfig) -> ClusterAddresses:
    if args.addresses:
        data = json.loads(args.addresses)
        return ClusterAddresses(tuple(data["ps"]), tuple(data["worker"]))
    if config.cluster is not None:
        return config.cluster
    if "TF_CONFIG" in os.environ:
        return ClusterAddresses.from_tf_config(os.environ["TF_CONFIG"])
    raise BackendError("no cluster addresses: give --addresses, the config's cluster or TF_CONFIG")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m simsync.tf_backend.cluster.task", allow_abbrev=False
    )
    parser.add_argument("--config", required=True, help="a ClusterRunConfig as JSON (to_json)")
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
