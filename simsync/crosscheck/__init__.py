"""Compare the simulator's prediction with what TensorFlow did on the same graph."""

from simsync.crosscheck.choose import crosscheck
from simsync.crosscheck.compare import CrossCheck, happens_before

__all__ = ["CrossCheck", "crosscheck", "happens_before"]
