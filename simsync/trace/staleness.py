"""The ledger of updates read off a trace: staleness, per client and as a distribution.

Staleness of an update = version at apply - version read - 1 (:class:`~simsync.trace.Update`).
Synchronous training gives 0 everywhere; N asynchronous workers give about N - 1 on average.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from simsync.ir import natural_key
from simsync.trace.events import Trace, Update

__all__ = ["histogram_distance", "staleness_by_client", "staleness_stats", "throughput"]


def staleness_stats(trace: Trace) -> dict[str, Any]:
    """Mean, max and histogram (staleness -> count) of the applied updates' staleness, and how
    many updates were applied and dropped.

    >>> t = Trace(updates=[Update("w0", 0, "a", 0, 0, True, 1.0),
    ...                    Update("w1", 0, "a", 0, 1, True, 1.0),
    ...                    Update("w2", 0, "a", 0, 2, False, 1.0)])
    >>> stats = staleness_stats(t)
    >>> stats["mean"], stats["max"], stats["histogram"]
    (0.5, 1, {'0': 1, '1': 1})
    >>> stats["updates_applied"], stats["updates_dropped"]
    (2, 1)
    """
    applied = [u.staleness for u in trace.updates if u.applied]
    counts = Counter(applied)
    return {
        "mean": float(np.mean(applied)) if applied else 0.0,
        "max": max(applied, default=0),
        "histogram": {str(k): counts[k] for k in sorted(counts)},
        "updates_applied": len(applied),
        "updates_dropped": sum(1 for u in trace.updates if not u.applied),
    }


def staleness_by_client(trace: Trace) -> dict[str, dict[str, float]]:
    """Per client: updates applied and dropped, mean and max staleness (of all its updates,
    dropped ones included: a dropped update is one that was too stale)."""
    rows: dict[str, list[Update]] = {}
    for update in trace.updates:
        rows.setdefault(update.client, []).append(update)
    return {
        client: {
            "applied": sum(1 for u in updates if u.applied),
            "dropped": sum(1 for u in updates if not u.applied),
            "mean": float(np.mean([u.staleness for u in updates])),
            "max": max(u.staleness for u in updates),
        }
        for client, updates in sorted(rows.items(), key=lambda item: natural_key(item[0]))
    }


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


def throughput(trace: Trace, runs: set[tuple[str, int]] | None = None) -> float:
    """Updates per second, summed over clients: each client's runs (only ``runs``, pairs of
    client and step, when given) divided by the time from its first one's start to its last
    one's end.

    >>> from simsync.trace.events import StepRecord
    >>> t = Trace(steps=[StepRecord(c, i, i * 0.1, i * 0.1 + 0.1) for c in "ab" for i in range(5)])
    >>> round(throughput(t), 6)
    20.0
    """
    spans: dict[str, list[float]] = {}
    counts: Counter[str] = Counter()
    for record in trace.steps:
        if runs is not None and (record.client, record.step) not in runs:
            continue
        span = spans.setdefault(record.client, [record.start, record.end])
        span[0], span[1] = min(span[0], record.start), max(span[1], record.end)
        counts[record.client] += 1
    return sum(counts[c] / (end - start) for c, (start, end) in spans.items() if end > start)
