"""A tower's side of synchronised batch norm: ``moments`` (its sums, forward) and
``moments_backward`` (the first layer's gradients through the global statistics).

``moments`` provides the tower's **moments** and needs the **parameters** (the first layer's
and the moving statistics) and the **batch**. ``moments_backward`` provides whole
**gradients** and needs the tower's partial **gradients**, every tower's **statistics
gradients** added up, and the tower's **loss** (what the first layer's gradients go through).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from simsync.errors import GraphError
from simsync.kinds.contract import (
    Abstract,
    AbstractContext,
    BuilderLike,
    Inputs,
    OpLike,
    RunLike,
    one,
)
from simsync.kinds.registry import OpKind, Style, register
from simsync.numerics import batch_norm

#: the parameters a tower's moments are computed with, besides the moving statistics
FIRST_LAYER = frozenset({"layer_0/kernel", "layer_0/bias"})

__all__ = ["MOMENTS", "MOMENTS_BACKWARD", "Moments"]


class Moments(NamedTuple):
    """A tower's share of the statistics: sum and sum of squares of the normalised layer's
    input, the examples counted, and the moving statistics as the run read them (numpy arrays
    or TensorFlow tensors)."""

    total: Any
    squares: Any
    count: Any
    read: dict[str, Any]


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> Moments:
    params, batch = inputs.one("parameters"), inputs.one("batch")
    read = {name: params[name] for name in batch_norm.moving_shapes(ctx.spec)}
    return Moments(*batch_norm.moments(batch_norm.pre_activation(params, batch.x)), read)


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> Moments:
    tf = builder.tf
    params, (x, _) = inputs.one("parameters"), inputs.one("batch")
    z = builder.pre_activation(params, x)
    read = {name: params[name] for name in batch_norm.moving_shapes(builder.spec)}
    with tf.control_dependencies([builder.work(op)]):
        total, squares = tf.reduce_sum(z, axis=0), tf.reduce_sum(z * z, axis=0)
        count = tf.constant(builder.spec.batch_size, dtype=tf.float64)  # a tensor: gated too
        return Moments(total, squares, count, read)


def _backward(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    """The tower's gradients, the first layer's now complete: through the statistics, with
    every tower's gradient by them (the backward sync point's sum)."""
    partial = inputs.one("gradients")
    by_mean, by_variance = inputs.one("statistics gradients")
    cache = partial.cache
    through = batch_norm.through_statistics(cache.z, cache.statistics, by_mean, by_variance)
    first = batch_norm.layer_gradients(cache.batch.x, partial.direct + through)
    grads = {**partial.grads, **first}
    return {name: grads[name] for name in cache.params if name in grads}


def _lower_backward(builder: BuilderLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    """The gradient of the global statistics by this tower's first layer, weighted by every
    tower's gradient by them (``tf.gradients`` with ``grad_ys``), added to the tower's own."""
    tf = builder.tf
    (grads, _, _), forward = inputs.one("gradients"), inputs.one("loss")
    weights = list(inputs.one("statistics gradients"))
    stats, first = forward.statistics, ["layer_0/kernel", "layer_0/bias"]
    through = tf.gradients(
        [stats.mean, stats.variance], [forward.params[n] for n in first], grad_ys=weights
    )
    with tf.control_dependencies([builder.work(op)]):
        out = dict(grads)
        for name, extra in zip(first, through, strict=True):
            out[name] = grads[name] + extra
        return out


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The first layer's parameters and the moving statistics must be among those read."""
    lacking = sorted((FIRST_LAYER | context.moving) - inputs.one("parameters").parameters)
    if lacking:
        source = inputs.sources("parameters")[0]
        raise GraphError(
            f"op '{op.name}' (moments) computes with the first layer and the moving "
            f"statistics, but '{source.name}' ({source.kind}) gives it no {', '.join(lacking)}: "
            f"make it read the variables that hold them"
        )
    return Abstract("moments", context.moving)


def _abstract_backward(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """Partial gradients in, of a loss normalised with the global statistics; whole ones out."""
    partial, loss = inputs.one("gradients"), inputs.one("loss")
    if not partial.partial or not loss.given:
        source = inputs.sources("gradients" if not partial.partial else "loss")[0]
        raise GraphError(
            f"op '{op.name}' (moments_backward) finishes the gradients of a loss normalised "
            f"with batch norm's global statistics, and '{source.name}' ({source.kind}) is not "
            f"of one: its forward op needs a tensor from the batch_statistics op"
        )
    return Abstract("gradients", context.trainable)


MOMENTS = register(
    OpKind(
        "moments",
        "A tower's share of batch norm's statistics: the sum and sum of squares of its batch.",
        Style("S", "blue", "#393b79"),
        provides="moments",
        needs=(one("parameters"), one("batch")),
        numpy=_numpy,
        lower=_lower,
        abstract=_abstract,
    )
)

MOMENTS_BACKWARD = register(
    OpKind(
        "moments_backward",
        "A tower's first-layer gradients through the global statistics of batch norm.",
        Style("W", "magenta", "#7b4173"),
        provides="gradients",
        needs=(one("gradients"), one("statistics gradients"), one("loss")),
        numpy=_backward,
        lower=_lower_backward,
        abstract=_abstract_backward,
    )
)
