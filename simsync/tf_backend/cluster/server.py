"""What every task of a cluster asks of TensorFlow: its servers' and sessions' config, and the
one line of a TensorFlow error that says what went wrong."""

from __future__ import annotations

import os
from typing import Any

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


def server_config(tf: Any) -> Any:
    """The ConfigProto of every server and session of a cluster: no graph rewriting, neither
    grappler nor the classic constant folding (every node keeps its name in the traces), one
    thread per op, as many ops as cores at once."""
    config = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=os.cpu_count() or 1, intra_op_parallelism_threads=1
    )
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    config.graph_options.optimizer_options.do_constant_folding = False
    return config
