"""What every task of a cluster asks of TensorFlow: its servers' and sessions' config, and the
one line of a TensorFlow error that says what went wrong."""

from __future__ import annotations

import os
from typing import Any

from simsync.tf_backend.session.gpus import worker_gpu

__all__ = ["reason", "server_config"]


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
    (:func:`~simsync.tf_backend.session.gpus.worker_gpu`) and takes its memory as it needs it."""
    config = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=os.cpu_count() or 1, intra_op_parallelism_threads=1
    )
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    config.graph_options.optimizer_options.do_constant_folding = False
    gpus = len(tf.config.list_physical_devices("GPU")) if job == "worker" else 0
    gpu = worker_gpu(index, gpus)
    if gpu is not None:
        config.gpu_options.visible_device_list = str(gpu)
        config.gpu_options.allow_growth = True
    return config
