"""Numbers read off a trace: step times, loss curves, and who waited for whom at sync points."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TypedDict

import numpy as np

from simsync.ir import (
    Feeds,
    Graph,
    expected_duration,
    input_towers,
    natural_key,
    own_tower,
    topological_order,
    tower_dependencies,
    tower_label,
)
from simsync.trace.events import Trace

__all__ = [
    "NOTICEABLE_WAIT",
    "StepTimeStats",
    "SyncWait",
    "came_last",
    "expected_last",
    "loss_curve",
    "named_straggler",
    "own_work",
    "slowest_towers",
    "step_time_stats",
    "sync_waits",
    "time_to_loss",
    "together",
    "tower_arrivals",
    "waits_at",
]


class StepTimeStats(TypedDict):
    """Step times in seconds (:func:`step_time_stats`)."""

    mean: float
    p50: float
    p95: float


#: the share of a step a tower must wait at a sync point for the one it waited for to be
#: late: below it, the towers arrive together, and which one is counted last is a tie-break
#: (a transfer's turn at a port, the order the threads took them in)
NOTICEABLE_WAIT = 0.01


def together(waits: Mapping[str, float], step: float) -> bool:
    """Whether the towers arrive together at a sync point: none of its mean ``waits`` (by
    tower, seconds) is :data:`NOTICEABLE_WAIT` of a ``step``.

    >>> together({"tower_0": 3.6e-5, "tower_1": 0.0}, 0.016), together({"tower_0": 0.01}, 0.02)
    (True, False)
    """
    return max(waits.values(), default=0.0) <= NOTICEABLE_WAIT * step


def step_time_stats(trace: Trace) -> StepTimeStats:
    """Mean, median and 95th percentile of the step times, in seconds.

    >>> from simsync.trace.events import StepRecord
    >>> t = Trace(steps=[StepRecord("main", i, i * 0.1, i * 0.1 + 0.05) for i in range(4)])
    >>> {k: round(v, 3) for k, v in step_time_stats(t).items()}
    {'mean': 0.05, 'p50': 0.05, 'p95': 0.05}
    """
    durations = np.array([end - start for _, _, start, end, _ in trace.steps])  # .duration
    if durations.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0}
    return {
        "mean": float(durations.mean()),
        "p50": float(np.percentile(durations, 50)),
        "p95": float(np.percentile(durations, 95)),
    }


@dataclass(frozen=True)
class SyncWait:
    """At one sync point: mean seconds each tower's input sat waiting for the last one, and how
    often each tower was the last (the one everybody waited for; see :func:`came_last`). Which
    tower, if any, is *the* straggler is :func:`straggler`'s to say, from ``last``."""

    sync_point: str
    mean_wait: dict[str, float]
    last: dict[str, int]
    executions: int


def came_last(arrived: Mapping[str, float]) -> list[str]:
    """Who came last, from when each tower's input arrived: the one that arrived latest (on a
    tie, all the latest), and nobody when all arrived together (nobody waited for anybody).

    The one rule for simulated and real traces alike.

    >>> came_last({"tower_0": 1.0, "tower_1": 2.0, "tower_2": 2.0})
    ['tower_1', 'tower_2']
    >>> came_last({"tower_0": 1.0, "tower_1": 1.0}), came_last({"tower_0": 1.0})
    ([], [])
    """
    if not arrived:
        return []
    latest = max(arrived.values())
    last = [who for who, at in arrived.items() if at == latest]
    return [] if len(last) == len(arrived) else last


def tower_arrivals(graph: Graph, point: str, ends: Mapping[str, float]) -> dict[str, float]:
    """When each tower's input reached sync point ``point``: per tower, the latest end among
    the inputs in ``ends`` (input op -> end) that are one tower's own work
    (:func:`~simsync.ir.own_tower`): its tensors' sources, and for a take, the pushes it took."""
    labels: dict[str, str] = graph.memo("own_tower_labels", partial(_own_labels, graph))
    arrived: dict[str, float] = {}
    for src, end in ends.items():
        label = labels.get(src)
        if label is not None:
            arrived[label] = max(arrived.get(label, end), end)
    return arrived


def _own_labels(graph: Graph) -> dict[str, str]:
    """Every op that is one tower's own work, and that tower's label; computed once per
    graph (a summary asks for each input of each sync point's every execution)."""
    found = {}
    for op in graph.ops():
        tower = own_tower(graph, op.name)
        if tower is not None:
            found[op.name] = tower_label(graph, tower)
    return found


def waits_at(point: str, executions: Iterable[tuple[float, Mapping[str, float]]]) -> SyncWait:
    """At sync point ``point``, over its ``executions`` (each: when it could start, and when
    each tower's input arrived, :func:`tower_arrivals`): the mean time each tower's input
    waited for it, and how often each tower came last (:func:`came_last`). The one tally for
    simulated and real traces alike (:func:`sync_waits`,
    :func:`simsync.crosscheck.evidence.arrivals`).

    >>> w = waits_at("sum", [(3.0, {"tower_0": 1.0, "tower_1": 3.0}),
    ...                      (5.0, {"tower_0": 5.0, "tower_1": 4.0})])
    >>> w.mean_wait, w.last, w.executions
    ({'tower_0': 1.0, 'tower_1': 0.5}, {'tower_0': 1, 'tower_1': 1}, 2)
    """
    total: dict[str, float] = defaultdict(float)
    last: dict[str, int] = defaultdict(int)
    count = 0
    for ready, arrived in executions:
        count += 1
        for label, at in arrived.items():
            total[label] += ready - at
        for label in came_last(arrived):
            last[label] += 1
    labels = sorted(total, key=natural_key)
    return SyncWait(
        sync_point=point,
        mean_wait={label: total[label] / max(count, 1) for label in labels},
        last={label: last.get(label, 0) for label in labels},
        executions=count,
    )


def sync_waits(graph: Graph, trace: Trace, points: list[str]) -> list[SyncWait]:
    """For every sync point: for each tower, the mean time its input arrived before the op
    could start (it waited for the others); and which tower's input arrived last.

    An input that arrived at time ``t`` at an op ready at ``r`` waited ``r - t``: the op is
    ready exactly when its last input arrives (both executors record when each input
    arrived: :attr:`~simsync.trace.OpRecord.arrivals`). A take is ready when the resource
    served it (``ready + blocked``); its inputs are the pushes it took.
    """
    return [
        waits_at(
            point,
            (
                (
                    record.ready + record.blocked,
                    tower_arrivals(graph, point, dict(record.arrivals)),
                )
                for record in trace.ops
                if record.op == point
            ),
        )
        for point in points
    ]


#: How much longer (relatively) one tower's own work up to a sync point must be than every
#: other's for the graph to expect it last there (:func:`expected_last`).
WORK_MARGIN = 0.15


def own_work(graph: Graph, point: str, feeds: Feeds | None = None) -> dict[str, float]:
    """Per tower, the expected seconds of its own work up to sync point ``point``: the longest
    chain of its own ops (placed in it, or depending on it alone) ending at one of its inputs
    of ``point``, each op at its device's speed (:func:`~simsync.ir.expected_duration`).
    Work before an earlier sync point is shared by every tower, so it is not counted.
    ``feeds``: the inputs through resources (:func:`simsync.kinds.resource_feeds`).

    >>> from simsync.patterns import tiny_example
    >>> {t: round(s, 3) for t, s in own_work(tiny_example(), "average_gradients").items()}
    {'tower_0': 0.02, 'tower_1': 0.02}
    """
    longest: dict[str, float] = graph.memo("own_work_chains", partial(_own_chains, graph))
    work: dict[str, float] = {}
    for src, tower in input_towers(graph, point, feeds).items():
        label = tower_label(graph, tower)
        work[label] = max(work.get(label, 0.0), longest.get(src, 0.0))
    return work


def _own_chains(graph: Graph) -> dict[str, float]:
    """For every op that is one tower's own work, the longest chain of such ops ending with
    it (expected seconds); computed once per graph."""
    towers = tower_dependencies(graph)
    longest: dict[str, float] = {}
    for name in topological_order(graph):
        op = graph.op(name)
        if op.tower is None and len(towers[name]) != 1:
            continue  # no single tower's own work
        before = (longest.get(p, 0.0) for p in graph.nx.predecessors(name))
        longest[name] = expected_duration(graph, op) + max(before, default=0.0)
    return longest


def expected_last(graph: Graph, point: str, feeds: Feeds | None = None) -> str:
    """The tower the graph expects to come last at sync point ``point``: the one whose own
    work up to it (:func:`own_work`) is longer than every other tower's by more than
    :data:`WORK_MARGIN`, or "" when the towers' work is about equal (then which one comes last is
    the scheduler's order, and only that), or when ``point`` is a take of fewer gradients than
    there are workers (it goes on without the slowest).

    >>> from simsync.patterns import tiny_example
    >>> expected_last(tiny_example(), "average_gradients")
    ''
    """
    slowest = slowest_towers(graph, point, feeds) or []
    return slowest[0] if len(slowest) == 1 else ""


def slowest_towers(graph: Graph, point: str, feeds: Feeds | None = None) -> list[str] | None:
    """The towers with the most own work up to sync point ``point`` (:func:`own_work`): those
    within :data:`WORK_MARGIN` of the longest (towers as slow as each other: one of them
    comes last, whichever the order has); none when every tower is within that margin.
    None where the question does not apply: fewer than two towers, or ``point`` a take of
    fewer gradients than there are workers (it goes on without the slowest).

    >>> from simsync.patterns import tiny_example
    >>> slowest_towers(tiny_example(), "average_gradients")
    []
    """
    work = own_work(graph, point, feeds)
    if len(work) < 2:
        return None
    taken = graph.op(point).amount if feeds and point in feeds else 0
    if 0 < taken < len(work):  # a take of R of N: it never waits for the slowest
        return None
    longest = max(work.values())
    slowest = sorted(
        (t for t, w in work.items() if w * (1 + WORK_MARGIN) >= longest), key=natural_key
    )
    return [] if len(slowest) == len(work) else slowest


#: How unlikely (one-sided, over all towers) a lead must be by chance to name a straggler.
STRAGGLER_ALPHA = 0.01


def straggler(last: Mapping[str, int]) -> str:
    """The tower that was last at a sync point clearly more often than chance allows, or "".

    ``last`` counts, per tower (every tower of the sync point, zeros included), the steps in
    which it was the last to arrive. If the ``k`` towers were equally likely to be last, the
    most often last one's count ``n1`` of ``n`` would be a binomial draw with ``p = 1/k``. It is
    named only when a count that high has probability below 1 % for any of the ``k`` towers
    (``k`` times the binomial tail, Bonferroni). So a tie is never a straggler, nor is noise
    among equal towers (259 against 256 and 250 times in 765 steps), while one of four towers
    last in 9 steps of 10 is (probability 1e-4), and one of two towers last in 7 of 10 is not
    (0.34).

    >>> straggler({"tower_0": 0, "tower_1": 20})
    'tower_1'
    >>> straggler({"tower_0": 259, "tower_1": 256, "tower_2": 250})
    ''
    >>> straggler({"tower_0": 3, "tower_1": 3}), straggler({"tower_1": 3}), straggler({})
    ('', '', '')
    >>> straggler({"tower_0": 0, "tower_1": 1, "tower_2": 0, "tower_3": 9})
    'tower_3'
    >>> straggler({"tower_0": 3, "tower_1": 7})
    ''
    """
    towers, trials = len(last), sum(last.values())
    if towers < 2 or trials == 0:
        return ""
    first, most = max(last.items(), key=lambda item: item[1])
    if sum(1 for count in last.values() if count == most) > 1:
        return ""  # a tie
    return first if towers * binomial_tail(most, trials, 1 / towers) < STRAGGLER_ALPHA else ""


def named_straggler(last: Mapping[str, int], expected: str | None) -> str:
    """The straggler a view or a verdict may name: the tower last clearly more often than
    chance allows (:func:`straggler`) when the graph gives it a reason to, being the tower
    with the most work (``expected``, :func:`expected_last`); "" otherwise. ``expected``
    None (not known: a summary written before it was kept) names :func:`straggler`'s.

    >>> named_straggler({"tower_0": 0, "tower_1": 20}, "tower_1")
    'tower_1'
    >>> named_straggler({"tower_0": 0, "tower_1": 20}, ""), named_straggler({}, None)
    ('', '')
    """
    found = straggler(last)
    return found if expected is None or found == expected else ""


def binomial_tail(at_least: int, trials: int, p: float) -> float:
    """P(X >= at_least) for X ~ Binomial(trials, p), summed in log space (no overflow).

    >>> round(binomial_tail(9, 10, 0.5), 6), binomial_tail(0, 5, 0.3)
    (0.010742, 1.0)
    """
    log_p, log_q = math.log(p), math.log1p(-p)
    whole = math.lgamma(trials + 1)
    return min(
        1.0,
        sum(
            math.exp(
                whole
                - math.lgamma(i + 1)
                - math.lgamma(trials - i + 1)
                + i * log_p
                + (trials - i) * log_q
            )
            for i in range(at_least, trials + 1)
        ),
    )


def loss_curve(trace: Trace, window: int = 1) -> list[tuple[float, float]]:
    """The training loss against wall-clock time: at each run's end (seconds from the first
    run's start), the mean loss of the last ``window`` runs to end. One synchronous step
    already averages N towers' batches; with N asynchronous workers, ``window = N`` averages
    as many batches, so the curves compare.

    >>> from simsync.trace.events import StepRecord
    >>> t = Trace(steps=[StepRecord("w", i, 0.0, 1.0 + i, float(4 - i)) for i in range(4)])
    >>> loss_curve(t, window=2)
    [(1.0, 4.0), (2.0, 3.5), (3.0, 2.5), (4.0, 1.5)]
    """
    runs = sorted((s for s in trace.steps if s.loss is not None), key=lambda s: s.end)
    if not runs:
        return []
    start = min(s.start for s in trace.steps)
    losses = np.array([s.loss for s in runs], dtype=float)
    sums = np.cumsum(np.concatenate([[0.0], losses]))
    curve = []
    for i, record in enumerate(runs):
        first = max(0, i + 1 - window)
        curve.append((record.end - start, float((sums[i + 1] - sums[first]) / (i + 1 - first))))
    return curve


def time_to_loss(curve: list[tuple[float, float]], target: float) -> float | None:
    """The first time the curve is at or below ``target`` (None if it never is).

    >>> time_to_loss([(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)], 2.5)
    2.0
    """
    return next((time for time, loss in curve if loss <= target), None)
