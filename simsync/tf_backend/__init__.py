"""The real backend: the same graph, executed by TensorFlow, recorded as the same Trace.

The only package that imports TensorFlow, and only when a function here is called.
"""

from simsync.tf_backend.execute import TensorFlowRun, run_on_tensorflow
from simsync.tf_backend.runtime import BackendError

__all__ = ["BackendError", "TensorFlowRun", "run_on_tensorflow"]
