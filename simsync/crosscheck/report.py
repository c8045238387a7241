"""The cross-check reports, typed: what each kind of check found, section by section.

A report is a ``TypedDict``, not a dataclass: it is the JSON object ``simsync crosscheck
--json`` prints, so ``json.dumps`` prints it as it is, and scripts and tests read it by key as
they read that JSON. Each report says which check made it in ``check``, named after what in
the graph chose that check (as nothing downstream branches on a training mode's name):
``one_client`` (towers of one client: :func:`simsync.crosscheck.crosscheck`),
``racing_clients`` (several clients racing, as asynchronous workers do:
:mod:`simsync.crosscheck.asynchronous`) or ``cluster`` (ops that run only on a real cluster,
SyncReplicasOptimizer's: :mod:`simsync.crosscheck.sync_replicas`). Views and verdicts dispatch
on it, never on which keys a report happens to have. ``check`` is for the program:
:func:`report_json` leaves it out, so the JSON keeps the keys it has always had.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict, final

from simsync.trace import ClientStaleness, GradientCounts, StalenessStats

__all__ = [
    "Arrival",
    "AsyncEvidence",
    "AsyncReport",
    "Check",
    "ClusterInfo",
    "CostsKind",
    "Evidence",
    "MachineCheck",
    "MachineMeasure",
    "MissingOp",
    "MovingCheck",
    "MovingEqual",
    "MovingRace",
    "OpTiming",
    "Overlap",
    "ProtocolComparison",
    "ProtocolSide",
    "RaceOutcomes",
    "Ratio",
    "RefitReport",
    "ReplayValues",
    "ReplicaValues",
    "Report",
    "SideBySide",
    "StalenessComparison",
    "StalenessEvidence",
    "StepByStep",
    "Structure",
    "StructureOfRuns",
    "SyncReplicasReport",
    "SyncReplicasTiming",
    "SyncReport",
    "ThroughputComparison",
    "Timing",
    "Values",
    "Violation",
    "report_json",
]

#: Which check made a report.
Check = Literal["one_client", "racing_clients", "cluster"]
#: Where the predicted costs come from (:func:`simsync.crosscheck.compare.costs_kind`).
CostsKind = Literal["scenario", "machine", "file"]


# -- structure: every report -----------------------------------------------------------------------
@final
class MissingOp(TypedDict):
    """An op of a run that does not appear in the real trace."""

    step: int
    client: str
    missing: str


@final
class Overlap(TypedDict):
    """An op that started before one of its inputs ended."""

    step: int
    client: str
    before: str
    after: str
    overlap_seconds: float


Violation = MissingOp | Overlap


class Structure(TypedDict):
    """Happens-before relations checked on the real trace, and those violated."""

    checked: int
    violations: list[Violation]
    ok: bool


class StructureOfRuns(Structure):
    """:class:`Structure` over the traced runs of several clients."""

    runs: int


# -- one_client: towers of one client --------------------------------------------------------------
@final
class MovingEqual(TypedDict):
    """Moving statistics that no update raced: equal to the simulator's."""

    compared: list[str]
    max_abs_diff: float
    tolerance: float
    ok: bool


class RaceOutcomes(TypedDict):
    """Which outcome of the moving statistics' race happened how often, per variable, against
    the simulator's prediction."""

    steps: int
    happened: dict[str, dict[str, int]]
    predicted: dict[str, dict[str, int]]
    racing_updates_predicted: int


@final
class MovingRace(TypedDict):
    """Moving statistics whose updates race: each step one outcome the race allows."""

    compared: list[str]
    race: RaceOutcomes
    ok: bool


MovingCheck = MovingEqual | MovingRace


class Values(TypedDict):
    """Parameters and losses, numpy against TensorFlow (and the moving statistics, if any)."""

    compared: list[str]
    max_abs_diff: float
    max_rel_diff: float
    loss_max_abs_diff: float
    tolerance: float
    ok: bool
    moving_statistics: NotRequired[MovingCheck]


class OpTiming(TypedDict):
    """One op kind's mean duration over the traced steps; ``timed_by``: what timed the real
    ops, ``kernels`` (a GPU's own, from its streams), ``executor`` (TensorFlow's records of
    the ops, on a CPU) or ``both`` (some ops of the kind each way)."""

    predicted: float
    measured: float
    error: float | None
    timed_by: str
    #: predicted at the scenario's own cost, which this machine's profile did not measure
    stand_in: bool


class Timing(TypedDict):
    """Predicted against measured step times (seconds) over the untraced steps."""

    predicted_step_time: float
    measured_step_time: float
    error: float | None  # relative; None when nothing was measured
    predicted_median_step_time: float
    measured_median_step_time: float
    measured_interval: list[float]  # [low, high]: 95 % of the measured median
    error_median: float | None
    timed_steps: int
    ops: dict[str, OpTiming]


class SideBySide(TypedDict):
    """Whether the towers' compute overlapped (:func:`~.evidence.side_by_side`)."""

    steps: int
    overlapped_steps: int
    apart_steps: int
    median_share: float
    verdict: str


class Arrival(TypedDict):
    """Who arrived last at one sync point (:func:`~.evidence.arrivals`)."""

    sync_point: str
    steps: int
    last: dict[str, int]
    mean_wait: dict[str, float]
    #: the tower the graph expects last (its own work clearly the longest), or ""
    expected: str
    #: in how many of the simulation's steps (``predicted_steps``) the expected tower came
    #: last, as a share; the tower the simulation has usually last ("": none); and whether
    #: the run names the same (:func:`~.evidence.with_prediction`)
    predicted_share: NotRequired[float]
    predicted_steps: NotRequired[int]
    predicted_last: NotRequired[str]
    as_predicted: NotRequired[str]
    #: the tower last in each step against the simulation of the same draws
    #: (:func:`~.evidence.step_by_step`), where its last tower changes from step to step
    step_by_step: NotRequired[StepByStep]


class StepByStep(TypedDict):
    """Who came last at a sync point step by step, against the simulation of the same steps
    (:func:`~.evidence.step_by_step`)."""

    #: the traced steps in which the simulation has one tower clearly last
    steps: int
    #: of those, the steps in which the real run had the same tower last
    matched: int
    #: the share a guess would match: one tower in as many as arrive
    chance: float
    #: how many towers the simulation has last in those steps
    towers_last: int
    #: the matched steps a verdict of "as predicted" takes at least
    needed: int
    verdict: str


class Ratio(TypedDict):
    """A variant's step time against the scenario's (:func:`~.evidence.interleaved_ratio`)."""

    variant: str
    rounds: int
    ratio: float
    interval: list[float]
    spread: float | None
    hypotheses: dict[str, float]
    verdict: str
    why: str | None  # why no verdict: "none inside", "several inside" or "too close"
    #: how much this machine drifts between runs: the interval widened by it decides
    drift: NotRequired[float]
    out_of_date: NotRequired[bool]  # no verdict: this machine's profile is out of date


class MachineMeasure(TypedDict):
    """A variant's predicted step time against its measured median and interval."""

    variant: str
    predicted: float
    measured: float
    interval: list[float]
    error: float | None


class MachineCheck(MachineMeasure):
    """:class:`MachineMeasure`, and whether this machine drifted from its profile."""

    drifted: bool
    #: the scenario's own step, measured the same way: drift shows in both
    scenario: NotRequired[MachineMeasure]


class Evidence(TypedDict):
    """What the real run of towers shows (:mod:`simsync.crosscheck.evidence`)."""

    side_by_side: SideBySide | None  # None: fewer than two towers computing
    arrivals: list[Arrival]
    ratios: list[Ratio]
    machine: MachineCheck | None  # None: predictions not for this machine, or no variant


class RefitReport(TypedDict):
    """What drifts, measured again in the cross-check's session (:mod:`simsync.crosscheck.
    refit`): each value as ``[the profile's, this session's]``, and the prediction the
    profile as cached would have made."""

    session_run: list[float]
    compute_scale: list[float]
    core_efficiency: list[float]
    cached_predicted_median_step_time: float
    cached_error_median: float | None
    #: see :class:`~simsync.crosscheck.refit.Refit`
    session_run_floor: NotRequired[float]


class SyncReport(TypedDict):
    """The report of one client's towers (:func:`simsync.crosscheck.crosscheck`)."""

    check: Literal["one_client"]
    scenario: str
    steps: int
    warmup: int
    devices: str
    tensorflow: str
    costs: str  # where the predicted costs come from, in words
    costs_kind: CostsKind
    structure: Structure
    values: Values
    timing: Timing
    evidence: Evidence
    unmapped_tensorflow_ops: dict[str, int]
    #: with this machine's profile: the prediction (``timing``) is from the refit
    refit: NotRequired[RefitReport]
    #: fewer towers run than the scenario has (as many as this machine's cores), and why
    fewer_towers: NotRequired[str]


# -- racing_clients: asynchronous workers ----------------------------------------------------------
class ReplayValues(TypedDict):
    """TensorFlow's ledger replayed through numpy, against TensorFlow's parameters."""

    exact: bool  # every apply under its lock: the replay must agree
    tolerance: float
    note: str | None  # why a lock-free replay can only come close
    why: str | None  # why the ledger could not be replayed
    replayed: bool
    max_abs_diff: float | None
    ok: bool


class StalenessComparison(TypedDict):
    """Staleness of the updates, simulated against measured."""

    predicted: StalenessStats
    measured: StalenessStats
    distance: float  # between the histograms: 0 same, 1 disjoint
    mean_error: float
    #: per worker, simulated and measured: a straggler's updates are the stalest
    by_worker: NotRequired[dict[str, dict[str, ClientStaleness]]]
    #: the worker whose updates stood out as stalest ("" when none did), by side
    stalest: NotRequired[dict[str, str]]


class ThroughputComparison(TypedDict):
    """Updates per second, predicted against measured on the untraced timed runs."""

    predicted: float
    measured: float
    error: float | None
    timed_runs: int


class StalenessEvidence(TypedDict):
    """Whether the real updates were stale, and as predicted (:func:`~.evidence.staleness`)."""

    updates: int
    #: None where only the means of blocks of updates are known (a cluster's, its kernels')
    stale_updates: int | None
    mean: float
    median_block: float
    interval: list[float]
    blocks: int
    predicted: float
    verdict: str
    prediction: str
    #: how far beyond the interval a prediction must lie to be called wrong
    margin: float


class AsyncEvidence(TypedDict):
    """What the real run of racing workers shows."""

    staleness: StalenessEvidence | None  # None: no ledger


class AsyncReport(TypedDict):
    """The report of racing workers (:func:`simsync.crosscheck.asynchronous.crosscheck_async`)."""

    check: Literal["racing_clients"]
    scenario: str
    mode: str | None
    steps: int
    warmup: int
    workers: int
    updates: int
    devices: str
    tensorflow: str
    costs: str
    costs_kind: CostsKind
    structure: StructureOfRuns
    values: ReplayValues
    staleness: StalenessComparison
    throughput: ThroughputComparison
    evidence: AsyncEvidence
    unmapped_tensorflow_ops: dict[str, int]


# -- cluster: SyncReplicasOptimizer on a real cluster ----------------------------------------------
class ClusterInfo(TypedDict):
    """The processes of the real cluster."""

    parameter_servers: int
    workers: int
    addresses: dict[str, list[str]]
    private_network: bool
    start_seconds: float


class ReplicaValues(TypedDict):
    """The real ledger replayed through numpy, against TensorFlow's parameters and losses."""

    compared: list[str]
    max_abs_diff: float
    loss_max_abs_diff: float
    tolerance: float
    ok: bool


class ProtocolSide(TypedDict):
    """The protocol as one trace (simulated or real) ran it."""

    global_step: int
    applies: int
    one_apply_per_step: bool
    gradients: GradientCounts
    dropped_per_step: float | None


class ProtocolComparison(TypedDict):
    """The protocol, simulated and real."""

    predicted: ProtocolSide
    measured: ProtocolSide


class ClusterPricing(TypedDict):
    """What the prediction of a cluster on this machine was priced with: the costs of the
    pattern's ops measured once on a reference cluster (:mod:`simsync.crosscheck.pricing`),
    and the cores every task shares, with their efficiency (the machine's profile)."""

    costs: dict[str, float]
    host_cores: int
    core_efficiency: float
    #: the time between applies the scenario's own costs (each task on a host of its own)
    #: predict, against which the priced one is shown
    unpriced_step_time: float


class SyncReplicasTiming(TypedDict):
    """The mean time between applies (seconds), predicted against measured."""

    predicted_step_time: float
    measured_step_time: float
    error: float | None
    #: None: the tasks ran on the hosts of a cluster file, which this machine cannot price
    priced: NotRequired[ClusterPricing | None]


class SyncReplicasReport(TypedDict):
    """The report of SyncReplicasOptimizer on a real cluster
    (:func:`simsync.crosscheck.sync_replicas.crosscheck_sync_replicas`)."""

    check: Literal["cluster"]
    scenario: str
    mode: str | None
    steps: int
    workers: int
    replicas_to_aggregate: int
    devices: str
    tensorflow: str
    cluster: ClusterInfo
    structure: StructureOfRuns
    values: ReplicaValues
    protocol: ProtocolComparison
    timing: SyncReplicasTiming


#: A report of any kind; ``report["check"]`` says which.
Report = SyncReport | AsyncReport | SyncReplicasReport


def report_json(report: Report) -> dict[str, object]:
    """The report as ``simsync crosscheck --json`` prints it: every key but ``check``.

    >>> report_json({"check": "racing_clients", "scenario": "s", "workers": 2})
    {'scenario': 's', 'workers': 2}
    """
    return {key: value for key, value in report.items() if key != "check"}
