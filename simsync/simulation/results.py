"""What a simulation reports: the summary ``simsync simulate --json`` prints, typed.

Types only (no SimPy), so the views and the lessons can name them without the engine.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from simsync.trace import ClientStaleness, GradientStats, StalenessDistribution, StepTimeStats

__all__ = ["BatchNormSummary", "CriticalPath", "Summary"]


class CriticalPath(TypedDict):
    """The graph's longest path at mean costs, without contention."""

    ops: list[str]
    seconds: float


class BatchNormSummary(TypedDict):
    """Batch norm's part of a summary: the variant, the moving statistics' final values (with
    numerics only), their updates that raced, and what a step's updates made of them."""

    variant: str
    momentum: float
    moving_mean: NotRequired[list[float]]
    moving_variance: NotRequired[list[float]]
    racing_updates: int
    outcome: str | None  # what a step's updates made of a moving statistic, most often
    allowed_outcomes: list[str]


class Summary(TypedDict):
    """The JSON object of ``simsync simulate --json`` (:func:`summary`), key by key in the
    order it prints them. A TypedDict, not a dataclass: it *is* the JSON object, so
    ``json.dumps`` prints it as it is, and lessons' answer expressions index it by name."""

    scenario: str
    source: str  # the scenario's file
    mode: str | None  # the pattern's facts (None for a graph built by hand)
    aggregation: str | None
    towers: int  # the graph's towers (its ops' tower indices; 1 when none has one)
    workers: int  # clients that train on a batch (timing only: the loops, daemons aside)
    updating_clients: int  # clients whose runs update the model
    steps: int  # runs of the updating clients (of every non-daemon client if none updates)
    seed: int
    step_time: StepTimeStats
    throughput: float | None  # examples per second; None without a training run
    #: the same, of the runs whose gradients were applied (not dropped as stale)
    applied_throughput: float | None
    updates_per_second: float
    staleness: StalenessDistribution  # of the ledger's applied updates
    updates_applied: int
    updates_dropped: int
    staleness_by_client: dict[str, ClientStaleness]
    gradients: GradientStats | None  # None: nothing pushed to an accumulator
    sync_points: list[str]
    wait: dict[str, dict[str, float]]  # per sync point, per tower: mean seconds waited
    waited_for: dict[str, dict[str, int]]  # per sync point, per tower: times last
    # per sync point: the tower whose own work up to it is clearly the longest, or ""
    expected_last: dict[str, str]
    critical_path: CriticalPath
    loss: list[float | None]  # per training run
    final_loss: float | None
    events: int  # SimPy events processed
    wall_seconds: float  # the simulation's own time: the one value not set by the seed
    batch_norm: NotRequired[BatchNormSummary]  # only with batch norm
    # why no values were computed (a generic op stood where values pass); only then
    values_skipped: NotRequired[str]
