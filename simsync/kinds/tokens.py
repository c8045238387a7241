"""The token queue's two kinds: ``enqueue_tokens`` (the chief, after each apply, puts
``max(N, R)`` copies of the new global step) and ``dequeue_token`` (a worker, after its pushes,
takes one and makes it its local step; blocks while the queue is empty).

Neither needs an input: tokens go through the queue. ``enqueue_tokens`` provides **tokens**,
``dequeue_token`` a **local step** (and writes it: counters only)."""

from __future__ import annotations

from simsync.ir import resources
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["DEQUEUE_TOKEN", "ENQUEUE_TOKENS"]

_CLUSTER = "it runs on a real cluster with SyncReplicasOptimizer, not in one session"

ENQUEUE_TOKENS = register(
    OpKind(
        "enqueue_tokens",
        "Put tokens carrying the global step on the token queue.",
        Style("E", "yellow", "#e7ba52"),
        cost_key="enqueue_tokens",
        action=resources.ENQUEUE,
        provides="tokens",
        unlowered=_CLUSTER,
    )
)

DEQUEUE_TOKEN = register(
    OpKind(
        "dequeue_token",
        "Take one token from the token queue (blocks while it is empty) and make it the "
        "worker's local step.",
        Style("Q", "bright_yellow", "#dbdb8d"),
        cost_key="dequeue_token",
        action=resources.DEQUEUE,
        provides="local step",
        may_write=frozenset({"counter"}),
        unlowered=_CLUSTER,
    )
)
