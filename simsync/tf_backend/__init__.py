"""The real backend: the same graph, executed by TensorFlow, recorded as the same Trace.

The only package that imports TensorFlow, and only when a function here is called.
"""

from simsync.tf_backend.cluster import ClusterRun, ClusterRunConfig, run_sync_replicas_cluster
from simsync.tf_backend.session.execute import run_on_tensorflow
from simsync.tf_backend.session.prepare import TensorFlowRun
from simsync.tf_backend.session.runtime import BackendError

__all__ = [
    "BackendError",
    "ClusterRun",
    "ClusterRunConfig",
    "TensorFlowRun",
    "run_on_tensorflow",
    "run_sync_replicas_cluster",
]
