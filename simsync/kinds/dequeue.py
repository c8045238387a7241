"""``dequeue``: the tower's batch of examples (fed each step: the same batch in every engine).

Provides the **batch**. Needs no input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from simsync.kinds.contract import BuilderLike, Inputs, OpLike, RunLike
from simsync.kinds.registry import OpKind, Style, register
from simsync.numerics import Batch

__all__ = ["DEQUEUE", "batch_positions"]


def batch_positions(ops: Iterable[OpLike]) -> dict[int, int]:
    """For the ops of one client's run: each tower's position among the run's batches (the
    run's batches are drawn together, in tower order; see :func:`simsync.numerics.make_batches`).

    >>> from simsync.ir import Op
    >>> batch_positions([Op("w/dequeue", "dequeue", "/gpu:3", tower=3), Op("w/loss", "forward",
    ...                  "/gpu:3", tower=3)])
    {3: 0}
    """
    towers = sorted({op.tower or 0 for op in ops if op.kind == DEQUEUE.name})
    return {tower: position for position, tower in enumerate(towers)}


def _numpy_batch(
    contexts: Sequence[RunLike], ops: Sequence[OpLike], inputs: Sequence[Inputs]
) -> list[Batch]:
    """Each op's batch, named by (client, step, tower)."""
    return [ctx.batch(op.tower or 0) for ctx, op in zip(contexts, ops, strict=True)]


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> tuple[Any, Any]:
    tf, spec, tower = builder.tf, builder.spec, op.tower or 0
    x = builder.feed(tf.float64, [spec.batch_size, spec.features], f"tower_{tower}/x")
    if spec.kind == "linear":
        y = builder.feed(tf.float64, [spec.batch_size, spec.classes], f"tower_{tower}/y")
    else:
        y = builder.feed(tf.int64, [spec.batch_size], f"tower_{tower}/y")
    builder.lowered.batches[tower] = (x, y)
    return tf.identity(x, name="x"), tf.identity(y, name="y")


DEQUEUE = register(
    OpKind(
        "dequeue",
        "Take the tower's batch of examples from the input pipeline.",
        Style("D", "yellow", "#bcbd22"),
        cost_key="dequeue",
        provides="batch",
        numpy_batch=_numpy_batch,
        lower=_lower,
    )
)
