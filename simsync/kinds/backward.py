"""``backward``: the gradients of the tower's loss with respect to every parameter.

Provides the **gradients** (with batch norm's global statistics, *partial* ones: the part
through the statistics needs every tower's, see :mod:`simsync.kinds.moments`). Needs one
**loss**.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from simsync.numerics import backward_many, batch_norm

__all__ = ["BACKWARD"]


def _numpy_batch(
    contexts: Sequence[RunLike], ops: Sequence[OpLike], inputs: Sequence[Inputs]
) -> list[Any]:
    forwards = [op_inputs.one("loss") for op_inputs in inputs]
    spec = contexts[0].spec
    if spec.batch_norm != "none":  # tower by tower; with global statistics, a Partial
        return [batch_norm.backward(spec, f.activations) for f in forwards]
    return backward_many(spec, forwards)


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> Any:
    """``tf.gradients`` of the tower's loss; with global batch-norm statistics, held fixed
    (their gradient goes on to the backward sync point: ``(grads, by mean, by variance)``)."""
    tf = builder.tf
    forward = inputs.one("loss")
    loss, params, stats = forward.loss, forward.params, forward.statistics
    fixed = [stats.mean, stats.variance] if forward.given else []
    names = list(params)
    grads = tf.gradients(loss, [params[n] for n in names], stop_gradients=fixed)
    with tf.control_dependencies([builder.work(op)]):
        # the moving statistics the run read are no parameters of the loss: no gradient
        out = {n: tf.identity(g) for n, g in zip(names, grads, strict=True) if g is not None}
        if not fixed:
            return out
        return out, *[tf.identity(g) for g in tf.gradients(loss, fixed)]


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """Every trainable parameter's gradient; partial when the loss had global statistics."""
    loss = inputs.one("loss")
    return Abstract("gradients", context.trainable, partial=loss.given)


BACKWARD = register(
    OpKind(
        "backward",
        "The backward pass: the gradients of the tower's loss (time drawn from [compute]).",
        Style("B", "magenta", "#9467bd"),
        provides="gradients",
        needs=(one("loss"),),
        numpy_batch=_numpy_batch,
        lower=_lower,
        abstract=_abstract,
    )
)
