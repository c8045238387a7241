"""The ledger of updates read off a trace: staleness, per client and as a distribution.

Staleness of an update = version at apply - version read - 1 (:class:`~simsync.trace.Update`).
Synchronous training gives 0 everywhere; N asynchronous workers give about N - 1 on average.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from operator import itemgetter
from typing import TypedDict

from simsync.ir import Graph, natural_key
from simsync.trace.events import Trace, Update

__all__ = [
    "STANDS_OUT",
    "ClientStaleness",
    "StalenessDistribution",
    "StalenessStats",
    "histogram_distance",
    "racing_updates",
    "simulated_outcomes",
    "staleness_by_client",
    "staleness_stats",
    "stalest_client",
    "throughput",
    "unpaired_staleness",
    "updates_by_run",
    "variable_staleness",
]


#: per run (client, step): whether its update was applied, and its staleness
Runs = dict[tuple[str, int], tuple[bool, int]]


class StalenessDistribution(TypedDict):
    """The staleness of applied updates: mean, max, and how many had each staleness (its
    keys are the staleness values as text, as in JSON)."""

    mean: float
    max: int
    histogram: dict[str, int]


class StalenessStats(StalenessDistribution):
    """:class:`StalenessDistribution` of a ledger, and how many updates it applied and
    dropped (:func:`staleness_stats`)."""

    updates_applied: int
    updates_dropped: int


class ClientStaleness(TypedDict):
    """One client's updates (:func:`staleness_by_client`): applied, dropped, and the mean
    and max staleness of the applied ones (None when it had none)."""

    applied: int
    dropped: int
    mean: float | None
    max: int | None


def updates_by_run(trace: Trace) -> Runs:
    """One update per run (client and step): applied if any of its lines was, with the
    largest staleness of its lines. A synchronous all-reduce step writes every tower's mirrored
    copy, one ledger line each, yet moves the model once."""
    runs: dict[tuple[str, int], tuple[bool, int]] = {}
    for client, step, _, read, before, applied, _ in trace.updates:
        staleness = before - read  # Update.staleness, unpacked: a million lines
        found = runs.get((client, step))
        if found is None:
            runs[client, step] = (applied, staleness if staleness > 0 else 0)
        else:
            runs[client, step] = (found[0] or applied, max(found[1], staleness))
    return runs


def staleness_stats(trace: Trace, runs: Runs | None = None) -> StalenessStats:
    """Mean, max and histogram (staleness -> count) of the applied updates' staleness, and how
    many updates were applied and dropped (one update per run, see :func:`updates_by_run`;
    ``runs``: its result, if already computed).

    >>> from simsync.trace.events import Update
    >>> t = Trace(updates=[Update("w0", 0, "a", 0, 0, True, 1.0),
    ...                    Update("w1", 0, "a", 0, 1, True, 1.0),
    ...                    Update("w2", 0, "a", 0, 2, False, 1.0)])
    >>> stats = staleness_stats(t)
    >>> stats["mean"], stats["max"], stats["histogram"]
    (0.5, 1, {'0': 1, '1': 1})
    >>> stats["updates_applied"], stats["updates_dropped"]
    (2, 1)
    """
    updates = (updates_by_run(trace) if runs is None else runs).values()
    applied = [staleness for kept, staleness in updates if kept]
    counts = Counter(applied)
    return {
        "mean": _mean(applied) if applied else 0.0,
        "max": max(applied, default=0),
        "histogram": {str(k): counts[k] for k in sorted(counts)},
        "updates_applied": len(applied),
        "updates_dropped": len(updates) - len(applied),
    }


def _mean(stalenesses: list[int]) -> float:
    """The mean of whole numbers: their sum is exact, so this is ``numpy.mean`` of them to the
    last bit, without building an array (a summary takes it per client)."""
    return sum(stalenesses) / len(stalenesses)


def staleness_by_client(trace: Trace, runs: Runs | None = None) -> dict[str, ClientStaleness]:
    """Per client: updates applied and dropped, and the mean and max staleness of its applied
    updates (None if it had none), as :func:`staleness_stats` counts them."""
    rows: dict[str, list[tuple[bool, int]]] = defaultdict(list)
    for (client, _), update in (updates_by_run(trace) if runs is None else runs).items():
        rows[client].append(update)
    result: dict[str, ClientStaleness] = {}
    for client in sorted(rows, key=natural_key):
        applied = [staleness for kept, staleness in rows[client] if kept]
        result[client] = {
            "applied": len(applied),
            "dropped": len(rows[client]) - len(applied),
            "mean": _mean(applied) if applied else None,
            "max": max(applied) if applied else None,
        }
    return result


#: how much staler than the mean of the clients' mean staleness the stalest client must be to
#: stand out (:func:`stalest_client`)
STANDS_OUT = 1.5


def stalest_client(rows: Mapping[str, ClientStaleness]) -> str:
    """The client of :func:`staleness_by_client` whose applied updates were stalest on
    average, if it stands out (:data:`STANDS_OUT` times the clients' mean, half as stale
    again); else "".

    >>> stalest_client({"a": {"mean": 1.0}, "b": {"mean": 1.2}, "c": {"mean": 4.0}})
    'c'
    >>> stalest_client({"a": {"mean": 2.9}, "b": {"mean": 3.1}})
    ''
    """
    means = {client: row["mean"] for client, row in rows.items() if row["mean"] is not None}
    if len(means) < 2:
        return ""
    stalest = max(means, key=lambda client: means[client])
    return stalest if means[stalest] > STANDS_OUT * sum(means.values()) / len(means) else ""


def histogram_distance(a: dict[str, int], b: dict[str, int]) -> float:
    """Total variation distance between two staleness histograms: 0 when their shapes are the
    same, 1 when they share nothing.

    >>> histogram_distance({"0": 2, "1": 2}, {"1": 1, "2": 1})
    0.5
    """
    total_a, total_b = sum(a.values()), sum(b.values())
    if not total_a or not total_b:
        return 0.0 if total_a == total_b else 1.0
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0) / total_a - b.get(k, 0) / total_b) for k in keys)


def unpaired_staleness(reads: Sequence[float], updates: Sequence[float]) -> float | None:
    """The mean staleness of the updates of one variable that landed at the times ``updates``,
    from the times ``reads`` at which the runs that made them first read it, in any order and
    unpaired (which read made which update is not known: the kernels of a cluster's workers
    say when, not whose). An update's staleness is the count of other updates that landed
    between its read and it, so the sum over all updates is, whatever the pairing, the
    updates each landed after (0 + 1 + ... + n-1) less the updates landed before each read.
    None when the counts differ, or the times allow no pairing of each read before its update
    (one exists exactly when the k-th read, in order, came before the k-th update).

    >>> unpaired_staleness([0.0, 2.0], [1.0, 3.0])  # one after the other: none stale
    0.0
    >>> unpaired_staleness([0.0, 0.5], [1.0, 1.5])  # both read before either landed
    0.5
    >>> unpaired_staleness([0.0, 0.5, 0.6], [1.0, 1.1, 1.2])
    1.0
    >>> unpaired_staleness([2.0], [1.0]) is None
    True
    >>> unpaired_staleness([0.0, 0.0, 10.0], [1.0, 2.0, 3.0]) is None  # a read after all
    True
    """
    if len(reads) != len(updates) or not updates:
        return None
    landed = sorted(updates)
    if any(read > update for read, update in zip(sorted(reads), landed, strict=True)):
        return None
    count = len(landed)
    total = count * (count - 1) // 2 - sum(bisect_left(landed, read) for read in reads)
    return total / count


def variable_staleness(
    graph: Graph, trace: Trace, variables: Collection[str] | None = None
) -> float | None:
    """The mean over the variables the trace's updates write (only ``variables``, when
    given: those a measuring read off) of the mean staleness of each one's updates
    (:func:`unpaired_staleness`'s measure, from a ledger: exact), or None without applied
    updates."""
    by_variable: dict[str, list[int]] = defaultdict(list)
    for update in trace.updates:
        written = graph.op(update.op).writes[0]
        if update.applied and (variables is None or written in variables):
            by_variable[written].append(update.staleness)
    means = [sum(found) / len(found) for found in by_variable.values()]
    return sum(means) / len(means) if means else None


def throughput(trace: Trace, runs: set[tuple[str, int]] | None = None) -> float:
    """Runs (updates, in async training) per second: how many there were (only ``runs``,
    pairs of client and step, when given) over the time from the first one's start to the
    last one's end. Dropped updates count: their gradients were computed all the same.

    >>> from simsync.trace.events import StepRecord
    >>> t = Trace(steps=[StepRecord(c, i, i * 0.1, i * 0.1 + 0.1) for c in "ab" for i in range(5)])
    >>> round(throughput(t), 6)
    20.0
    """
    chosen = trace.steps if runs is None else [s for s in trace.steps if (s.client, s.step) in runs]
    if not chosen:
        return 0.0
    span = max(map(_END, chosen)) - min(map(_START, chosen))
    return len(chosen) / span if span > 0 else 0.0


_START, _END = itemgetter(2), itemgetter(3)  # of a StepRecord: map() over a million runs


def racing_updates(graph: Graph, trace: Trace) -> int:
    """Applied updates of variables that hold numbers but are not trained (batch norm's moving
    statistics) whose read version was replaced before they wrote: each such update lands on a
    value its run never read, as two ``assign_sub`` on one variable that both read the old
    value. Parameters' stale updates are staleness, not counted here."""
    variables = graph.variables
    racing = {
        op.name
        for op in graph.ops()
        if op.writes
        and all(not variables[v].trainable and not variables[v].counter for v in op.writes)
    }
    return sum(1 for u in trace.updates if u.applied and u.op in racing and u.read != u.before)


def simulated_outcomes(graph: Graph, trace: Trace) -> dict[str, Counter[str]]:
    """Per moving statistic, how often the simulator's updates of one step all read the same
    version (``sum``), read each the one before them (``sequential`` in their landing order),
    or neither (``mixed``)."""
    steps: dict[tuple[str, int, str], list[Update]] = defaultdict(list)
    for update in trace.updates:
        op = graph.op(update.op)
        for variable in op.writes:
            kept = graph.variables[variable]
            if not kept.trainable and not kept.counter and update.applied:
                steps[variable, update.step, update.client].append(update)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    for (variable, _, _), updates in steps.items():
        if all(u.read == updates[0].read for u in updates):
            outcome = "sum" if len(updates) > 1 else "sequential 0"
        elif all(u.read == u.before for u in updates):
            towers = sorted(updates, key=lambda u: u.before)
            outcome = "sequential " + ",".join(str(graph.op(u.op).tower or 0) for u in towers)
        else:
            outcome = "mixed"
        outcomes[variable][outcome] += 1
    return outcomes
