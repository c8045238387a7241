"""The sync points of synchronised batch norm: ``batch_statistics`` (forward: every tower's
sums make the global mean and variance) and ``statistics_gradients`` (backward: every tower's
gradient by those statistics, added up).

``batch_statistics`` provides the **statistics** and needs one or more towers' **moments**;
``statistics_gradients`` provides the **statistics gradients** and needs one or more towers'
partial **gradients** (of losses normalised with the global statistics).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsync.errors import GraphError
from simsync.kinds.contract import (
    Abstract,
    AbstractContext,
    BuilderLike,
    Inputs,
    OpLike,
    RunLike,
    some,
)
from simsync.kinds.registry import OpKind, Style, register
from simsync.numerics import batch_norm

__all__ = ["BATCH_STATISTICS", "STATISTICS_GRADIENTS"]


def _statistics(ctx: RunLike, op: OpLike, inputs: Inputs) -> batch_norm.Statistics:
    parts = inputs.some("moments")
    return batch_norm.statistics(
        [p.total for p in parts],
        [p.squares for p in parts],
        [p.count for p in parts],
        parts[0].read,
    )


def _lower_statistics(builder: BuilderLike, op: OpLike, inputs: Inputs) -> batch_norm.Statistics:
    """``add_n`` of the towers' sums on this op's device, then mean and variance."""
    tf, parts = builder.tf, inputs.some("moments")
    count = tf.add_n([p.count for p in parts])
    total = tf.add_n([p.total for p in parts])
    squares = tf.add_n([p.squares for p in parts])
    return batch_norm.from_sums(total, squares, count, parts[0].read)


def _lower_gradients(builder: BuilderLike, op: OpLike, inputs: Inputs) -> tuple[Any, Any]:
    tf, partials = builder.tf, inputs.some("gradients")
    return tf.add_n([p[1] for p in partials]), tf.add_n([p[2] for p in partials])


def _gradients(ctx: RunLike, op: OpLike, inputs: Inputs) -> tuple[Any, Any]:
    partials = inputs.some("gradients")
    return (
        np.sum([p.mean for p in partials], axis=0),
        np.sum([p.variance for p in partials], axis=0),
    )


def _abstract_statistics(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The statistics, carrying the moving statistics the towers read."""
    return Abstract("statistics", inputs.some("moments")[0].parameters)


def _abstract_gradients(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """Only partial gradients have a gradient by the global statistics."""
    for source, value in zip(inputs.sources("gradients"), inputs.some("gradients"), strict=True):
        if not value.partial:
            raise GraphError(
                f"op '{op.name}' (statistics_gradients) adds up the towers' gradients by batch "
                f"norm's global statistics, and '{source.name}' ({source.kind}) has none: "
                f"feed it backward ops whose forward op takes the batch_statistics op's output"
            )
    return Abstract("statistics gradients")


BATCH_STATISTICS = register(
    OpKind(
        "batch_statistics",
        "Batch norm's global mean and variance from every tower's sums (a forward sync point).",
        Style("N", "green", "#637939"),
        cost_key="batch_statistics",
        provides="statistics",
        needs=(some("moments"),),
        numpy=_statistics,
        lower=_lower_statistics,
        abstract=_abstract_statistics,
    )
)

STATISTICS_GRADIENTS = register(
    OpKind(
        "statistics_gradients",
        "Every tower's gradient by batch norm's global statistics, added up (a backward sync "
        "point).",
        Style("G", "green", "#8ca252"),
        cost_key="statistics_gradients",
        provides="statistics gradients",
        needs=(some("gradients"),),
        numpy=_gradients,
        lower=_lower_gradients,
        abstract=_abstract_gradients,
    )
)
