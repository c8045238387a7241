"""TensorFlow's own ``SyncReplicasOptimizer`` on a real parameter-server cluster of this machine.

The cluster does not lower the IR: every task builds the graph TensorFlow's optimizer builds
(``tf.compat.v1.train.SyncReplicasOptimizer`` over ``GradientDescentOptimizer``, its
accumulators, token queue and chief queue runner), and the run's ledger is read back into the
same Trace the simulator makes. ``run.py`` starts and follows the run; ``config.py`` holds its
settings; ``launch.py``, ``namespace.py``, ``processes.py`` and ``task.py`` start the processes
in a private network namespace, ``channel.py`` carries their messages, ``server.py`` is what
every task asks of TensorFlow; ``graph.py`` and ``worker.py`` are one task's graph and loop;
``ledger.py``, ``acceptance.py`` and ``trace.py`` rebuild what happened.
"""

from simsync.tf_backend.cluster.config import (
    ClusterAddresses,
    ClusterRunConfig,
    ModelWorkload,
    Round,
    TensorFlowTestWorkload,
    tensorflow_test_config,
)
from simsync.tf_backend.cluster.ledger import LedgerError, NodeTiming
from simsync.tf_backend.cluster.processes import ClusterError, StartedCluster
from simsync.tf_backend.cluster.run import ClusterRun, Observation, run_sync_replicas_cluster

__all__ = [
    "ClusterAddresses",
    "ClusterError",
    "ClusterRun",
    "ClusterRunConfig",
    "LedgerError",
    "ModelWorkload",
    "NodeTiming",
    "Observation",
    "Round",
    "StartedCluster",
    "TensorFlowTestWorkload",
    "run_sync_replicas_cluster",
    "tensorflow_test_config",
]
