"""The Trace both executors emit, and the statistics read off it."""

from simsync.trace.events import (
    OpRecord,
    StepRecord,
    Trace,
    TransferRecord,
    Update,
    VariableAccess,
)
from simsync.trace.staleness import (
    histogram_distance,
    staleness_by_client,
    staleness_stats,
    throughput,
)
from simsync.trace.stats import SyncWait, step_time_stats, sync_waits

__all__ = [
    "OpRecord",
    "StepRecord",
    "SyncWait",
    "Trace",
    "TransferRecord",
    "Update",
    "VariableAccess",
    "histogram_distance",
    "staleness_by_client",
    "staleness_stats",
    "step_time_stats",
    "sync_waits",
    "throughput",
]
