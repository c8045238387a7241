"""Gradients pushed to accumulators, read off a trace: how many were accepted or dropped, by
whom, and how stale the accepted ones were (SyncReplicasOptimizer's ledger).

A worker's run pushes one gradient per variable, each to that variable's accumulator. The run's
gradient counts as *accepted* when every push was, *dropped* when none was, and *split* when
some were (two pushes arriving together can land in different steps for different variables on
a real cluster; the simulator lands a run's pushes together). The staleness of an accepted
gradient is the global step it was applied at minus the version its run read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TypedDict

import numpy as np

from simsync.ir import natural_key
from simsync.ir.resources import PUSH, TAKE, Accumulator
from simsync.trace.events import ResourceEvent, Trace
from simsync.trace.staleness import StalenessDistribution

__all__ = [
    "GradientCounts",
    "GradientStats",
    "WorkerGradients",
    "gradient_stats",
    "push_outcomes",
    "takes",
    "takes_of_one_accumulator",
]

#: A take, and the accepted pushes it averaged.
Averaged = tuple[ResourceEvent, tuple[ResourceEvent, ...]]


def takes(events: Iterable[ResourceEvent]) -> list[Averaged]:
    """Every take among ``events``, in their order, with the accepted pushes it averaged: those
    its accumulator accepted since its take before, in the order they came. The accumulator's
    own rule (:class:`~simsync.ir.resources.Accumulator`) replayed on the recorded events: the
    engine's trace and TensorFlow's ledger alike.

    >>> events = [ResourceEvent("a", "push", "p", "w0", 0, 1.0, 0),
    ...           ResourceEvent("a", "push", "p", "w1", 0, 2.0, 0, 1, False),
    ...           ResourceEvent("b", "push", "p", "w1", 0, 2.0, 0),
    ...           ResourceEvent("a", "take", "t", "chief", 0, 2.0, 1, 1)]
    >>> [(take.resource, [p.client for p in pushes]) for take, pushes in takes(events)]
    [('a', ['w0'])]
    """
    accumulators: dict[str, Accumulator[ResourceEvent]] = defaultdict(Accumulator)
    found: list[Averaged] = []
    for event in events:
        if event.action == PUSH.name:
            if event.accepted:
                accumulators[event.resource].keep(event)
        elif event.action == TAKE.name:
            found.append((event, accumulators[event.resource].take().items))
    return found


def takes_of_one_accumulator(trace: Trace) -> list[Averaged]:
    """The takes of the accumulator taken from first (one variable's: every accumulator is
    taken from once per step), with the pushes each averaged."""
    found = takes(trace.resources)
    first = found[0][0].resource if found else None
    return [(take, pushes) for take, pushes in found if take.resource == first]


class WorkerGradients(TypedDict):
    """One worker's runs: how many pushed gradients, and how many were accepted or dropped."""

    pushed: int
    accepted: int
    dropped: int


class GradientCounts(WorkerGradients):
    """All workers' runs, with those whose pushes were partly accepted (``split``)."""

    split: int


class GradientStats(GradientCounts):
    """The gradients pushed to accumulators (:func:`gradient_stats`)."""

    by_worker: dict[str, WorkerGradients]
    dropped_per_step: float | None  # None: no take
    staleness: StalenessDistribution  # of the accepted gradients


def push_outcomes(trace: Trace) -> dict[tuple[str, int], str]:
    """Per run of a client (name, step) that pushed gradients to accumulators: ``accepted``,
    ``dropped`` (every push refused as stale) or ``split``."""
    runs: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for push in trace.resources:
        if push.action == PUSH.name:
            runs[push.client, push.step].append(push.accepted)
    return {run: _outcome(flags) for run, flags in runs.items()}


def gradient_stats(trace: Trace, counting: frozenset[str] = frozenset()) -> GradientStats | None:
    """``pushed``, ``accepted``, ``dropped`` and ``split`` gradients overall and ``by_worker``,
    ``per_step`` (dropped per take), and the ``staleness`` (mean, max, histogram) of the accepted
    ones; None when nothing was pushed. ``counting``: the ops that read counters only
    (:func:`simsync.ir.counter_readers`), whose reads say nothing of the model's version.

    >>> from simsync.trace.events import Read, ResourceEvent
    >>> t = Trace(resources=[ResourceEvent("a", "push", "p", "w0", 0, 1.0, 0, 1, True),
    ...                      ResourceEvent("a", "push", "p", "w1", 0, 2.0, 0, 1, False),
    ...                      ResourceEvent("a", "take", "t", "chief", 0, 2.0, 1, 1)],
    ...           reads=[Read("w0", 0, "r", (0,)), Read("w1", 0, "r", (0,))])
    >>> s = gradient_stats(t)
    >>> s["pushed"], s["accepted"], s["dropped"], s["by_worker"]["w1"]
    (2, 1, 1, {'pushed': 1, 'accepted': 0, 'dropped': 1})
    >>> s["staleness"]["mean"]
    0.0
    """
    outcome = push_outcomes(trace)
    if not outcome:
        return None
    by_worker: dict[str, Counter[str]] = defaultdict(Counter)
    for (client, _), result in outcome.items():
        by_worker[client]["pushed"] += 1
        by_worker[client][result] += 1
    totals = Counter(outcome.values())
    averaged = takes_of_one_accumulator(trace)
    return {
        "pushed": len(outcome),
        "accepted": totals["accepted"],
        "dropped": totals["dropped"],
        "split": totals["split"],
        "by_worker": {
            client: WorkerGradients(
                pushed=counts["pushed"], accepted=counts["accepted"], dropped=counts["dropped"]
            )
            for client, counts in sorted(by_worker.items(), key=lambda item: natural_key(item[0]))
        },
        "dropped_per_step": totals["dropped"] / len(averaged) if averaged else None,
        "staleness": _staleness(trace, averaged, counting),
    }


def _outcome(flags: list[bool]) -> str:
    return "accepted" if all(flags) else "dropped" if not any(flags) else "split"


def _staleness(
    trace: Trace, averaged: list[Averaged], counting: frozenset[str]
) -> StalenessDistribution:
    """Per accepted gradient of one accumulator: the step of the take that averaged it minus
    the version its run read."""
    read: dict[tuple[str, int], int] = {}
    for r in trace.reads:  # a run's first read of the model, not of its counters
        if r.versions and r.op not in counting:
            read.setdefault((r.client, r.step), r.versions[0])
    values: list[int] = []
    for take, pushes in averaged:
        values += [take.value - 1 - read.get((p.client, p.step), take.value - 1)
                   for p in pushes]  # fmt: skip
    counts = Counter(values)
    return {
        "mean": float(np.mean(values)) if values else 0.0,
        "max": max(values, default=0),
        "histogram": {str(k): counts[k] for k in sorted(counts)},
    }
