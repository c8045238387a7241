"""Which gradients an accumulator accepted: settled per take, by kernel times and by value.

See :mod:`simsync.tf_backend.cluster.ledger` for why this is exact and what is checked. The
rule, from TensorFlow's source: take ``k`` of a variable averages **all** the gradients with
local step ``k - 1`` that its accumulator processed before the take completed (at least R);
the other pushes with local step ``k - 1`` were dropped.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any, NamedTuple

import numpy as np

from simsync.tf_backend.session.runtime import BackendError
from simsync.trace import ResourceEvent

__all__ = ["LedgerError", "Push", "Settled", "Take", "average", "same", "settle"]

MAX_UNCERTAIN = 12  # pushes whose fate only their values can settle, per take


class LedgerError(BackendError):
    """The records do not determine one exact ledger (or contradict TensorFlow's end state)."""


class Push(NamedTuple):
    """One gradient pushed to one accumulator by ``client``'s run ``step``, tagged with
    ``local_step``; its kernel's span on the parameter server; the gradient as pushed."""

    client: str
    step: int
    local_step: int
    start: float
    end: float
    gradient: Any


class Take(NamedTuple):
    """Take ``step`` of one accumulator (the ``step``-th sync_op run): its kernel's span
    (issued at ``start``, completed by ``end``) and the average it returned."""

    step: int
    start: float
    end: float
    average: Any


class Settled(NamedTuple):
    """What :func:`settle` found for one accumulator."""

    events: list[ResourceEvent]
    after: dict[tuple[str, int], float]  # raced dropped pushes: listed after this time
    pending: int  # accepted gradients no take consumed
    uncertain: int  # pushes the kernels' times alone left open
    disagreements: int  # takes whose set the kernel order alone would have got wrong


def settle(
    variable: str, pushes: list[Push], takes: list[Take], replicas: int, dtype: str
) -> Settled:
    """Every push's and take's event on ``variable``'s accumulator."""
    resource = f"{variable}/grad_accum"
    accepted: dict[tuple[str, int], bool] = {}
    after: dict[tuple[str, int], float] = {}
    events, uncertain, disagreements = [], 0, 0
    by_step = defaultdict(list)
    for push in pushes:
        by_step[push.local_step].append(push)
    for take in takes:
        candidates = sorted(by_step.pop(take.step - 1, []), key=lambda p: (p.start, p.end))
        chosen, open_ = _choose(variable, take, candidates, replicas, dtype)
        _check_order(variable, take, takes, candidates, chosen)
        uncertain += open_
        disagreements += chosen != _by_kernel_order(take, candidates, replicas)
        for push in candidates:
            accepted[(push.client, push.step)] = push in chosen
            if push not in chosen and push.start <= take.end:
                after[(push.client, push.step)] = take.end  # it raced the take, and lost
        events.append(
            ResourceEvent(
                resource,
                "take",
                f"sync_replicas/take_gradients/{variable}",
                "queue_runner",
                take.step,
                take.end,
                take.step,
                len(chosen),
            )
        )
    pending = by_step.pop(len(takes), [])
    if by_step:
        raise LedgerError(f"{variable}: pushes with local steps {sorted(by_step)} match no take")
    for push in pending:
        accepted[(push.client, push.step)] = True
    for push in pushes:
        events.append(ResourceEvent(resource, "push", f"{push.client}/push_gradients/{variable}",
                                    push.client, push.step, push.start, push.local_step, 1,
                                    accepted[(push.client, push.step)]))  # fmt: skip
    return Settled(events, after, len(pending), uncertain, disagreements)


def _by_kernel_order(take: Take, candidates: list[Push], replicas: int) -> list[Push]:
    """What the kernel order alone says: the first R pushes, or every push that had ended
    before the take began if more (``candidates`` sorted by start)."""
    done_before = sum(1 for p in candidates if p.end < take.start)
    return sorted(candidates[: max(replicas, done_before)], key=lambda p: (p.start, p.end))


def _choose(
    variable: str, take: Take, candidates: list[Push], replicas: int, dtype: str
) -> tuple[list[Push], int]:
    """The candidates take ``take`` averaged (by kernel times where they decide, by value
    else, in kernel order), and how many were uncertain."""
    sure = [p for p in candidates if p.end < take.start]
    uncertain = [p for p in candidates if p not in sure and p.start <= take.end]
    if len(uncertain) > MAX_UNCERTAIN:
        raise LedgerError(f"{variable}: take {take.step} raced {len(uncertain)} pushes")
    matches = []
    for size in range(max(0, replicas - len(sure)), len(uncertain) + 1):
        for subset in itertools.combinations(uncertain, size):
            chosen = [p for p in candidates if p in sure or p in subset]
            if same(average([p.gradient for p in chosen]), take.average, dtype):
                matches.append(chosen)
    if len(matches) > 1:  # equal gradients: the accumulator's order is its kernels' order
        matches = [m for m in matches if m == candidates[: len(m)]]
    if len(matches) != 1:
        found = "no" if not matches else "more than one"
        raise LedgerError(
            f"{variable}: {found} set of the {len(candidates)} gradients pushed with local step "
            f"{take.step - 1} gives the average take {take.step} returned"
        )
    return matches[0], len(uncertain)


def _check_order(
    variable: str, take: Take, takes: list[Take], candidates: list[Push], chosen: list[Push]
) -> None:
    """Accepted pushes came after the previous take, and none after a dropped one."""
    if take.step > 1:
        previous = takes[take.step - 2]
        early = [p for p in chosen if p.start < previous.end]
        if early:
            raise LedgerError(
                f"{variable}: a gradient of take {take.step} came before take "
                f"{previous.step} ended ({early[0].client}, run {early[0].step})"
            )
    dropped = [p for p in candidates if p not in chosen]
    if dropped and chosen and min(p.end for p in dropped) < max(p.start for p in chosen):
        raise LedgerError(f"{variable}: take {take.step} kept a gradient pushed after one it "
                          "dropped had already been processed")  # fmt: skip


def average(gradients: list[Any]) -> Any:
    """The accumulator's average: the mean of dense gradients; for sparse ones (``indices``,
    ``values``), the mean of each row over the gradients that have it (as TensorFlow's
    ``SparseConditionalAccumulator`` does)."""
    if not isinstance(gradients[0], dict):
        return np.mean([np.asarray(g, dtype=np.float64) for g in gradients], axis=0)
    rows: dict[int, list[np.ndarray]] = defaultdict(list)
    for gradient in gradients:
        for index, value in zip(gradient["indices"], gradient["values"], strict=True):
            rows[int(index)].append(np.asarray(value, dtype=np.float64))
    return {"indices": sorted(rows), "values": [np.mean(rows[i], axis=0) for i in sorted(rows)]}


def same(average: Any, returned: Any, dtype: str) -> bool:
    """Equal to the rounding of ``dtype`` (sparse: the same rows, equal values)."""
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    if isinstance(returned, dict):
        if [int(i) for i in returned["indices"]] != list(average["indices"]):
            return False
        average, returned = average["values"], returned["values"]
    ours, theirs = np.asarray(average, dtype=np.float64), np.asarray(returned, dtype=np.float64)
    if ours.shape != theirs.shape:
        return False
    scale = max(1.0, float(np.max(np.abs(ours), initial=0.0)))
    return bool(np.all(np.abs(ours - theirs) <= 64 * eps * scale))
