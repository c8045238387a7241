"""The Trace both executors emit, and the statistics read off it."""

from simsync.trace.events import OpRecord, StepRecord, Trace, TransferRecord, VariableAccess
from simsync.trace.stats import SyncWait, step_time_stats, sync_waits

__all__ = [
    "OpRecord",
    "StepRecord",
    "SyncWait",
    "Trace",
    "TransferRecord",
    "VariableAccess",
    "step_time_stats",
    "sync_waits",
]
