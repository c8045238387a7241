"""The Trace both executors emit, and the statistics read off it."""

from simsync.trace.events import (
    OpRecord,
    Read,
    ResourceEvent,
    StepRecord,
    Trace,
    TransferRecord,
    Update,
    VariableAccess,
)
from simsync.trace.gradients import gradient_stats
from simsync.trace.race import Race, Runner
from simsync.trace.staleness import (
    histogram_distance,
    racing_updates,
    simulated_outcomes,
    staleness_by_client,
    staleness_stats,
    stalest_client,
    throughput,
    updates_by_run,
)
from simsync.trace.stats import (
    SyncWait,
    loss_curve,
    step_time_stats,
    straggler,
    sync_waits,
    time_to_loss,
)

__all__ = [
    "OpRecord",
    "Race",
    "Read",
    "ResourceEvent",
    "Runner",
    "StepRecord",
    "SyncWait",
    "Trace",
    "TransferRecord",
    "Update",
    "VariableAccess",
    "gradient_stats",
    "histogram_distance",
    "loss_curve",
    "racing_updates",
    "simulated_outcomes",
    "staleness_by_client",
    "staleness_stats",
    "stalest_client",
    "step_time_stats",
    "straggler",
    "sync_waits",
    "throughput",
    "time_to_loss",
    "updates_by_run",
]
