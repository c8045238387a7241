"""``forward``: the tower's loss on its batch, from the variables its run read.

Provides the **loss** (with batch norm, also the batch statistics it normalised with). Needs
the **parameters** and the **batch**, and optionally the **statistics** to normalise with (batch
norm's global ones; without, the batch's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simsync.errors import GraphError
from simsync.kinds.contract import (
    Abstract,
    AbstractContext,
    BuilderLike,
    Inputs,
    OpLike,
    RunLike,
    one,
    optional,
)
from simsync.kinds.registry import OpKind, Style, register
from simsync.numerics import ModelSpec, batch_norm, forward_many

__all__ = ["FORWARD", "Forward", "Ungated"]


class Forward:
    """A forward op's value in the replay: the loss, and what backward needs (with batch
    norm, the batch statistics it normalised with)."""

    __slots__ = ("activations", "batch", "loss", "params", "statistics")

    def __init__(
        self, loss: float, params: Any, batch: Any, activations: Any, statistics: Any = None
    ) -> None:
        self.loss, self.params, self.batch, self.activations = loss, params, batch, activations
        self.statistics = statistics


def _numpy_batch(
    contexts: Sequence[RunLike], ops: Sequence[OpLike], inputs: Sequence[Inputs]
) -> list[Forward]:
    """All the ops' losses in one pass: towers that read the same version share parameters.
    With batch norm, tower by tower, with the global statistics when the op is given them."""
    spec = contexts[0].spec
    if spec.batch_norm != "none":
        return [_normalized(spec, op_inputs) for op_inputs in inputs]
    params = [op_inputs.one("parameters") for op_inputs in inputs]
    batches = [op_inputs.one("batch") for op_inputs in inputs]
    losses, activations = forward_many(contexts[0].spec, params, batches)
    return [
        Forward(loss, p, b, a)
        for loss, p, b, a in zip(losses, params, batches, activations, strict=True)
    ]


def _normalized(spec: ModelSpec, op_inputs: Inputs) -> Forward:
    params, batch = op_inputs.one("parameters"), op_inputs.one("batch")
    loss, cache = batch_norm.forward(spec, params, batch, op_inputs.optional("statistics"))
    return Forward(loss, params, batch, cache, cache.statistics)


class Ungated:
    """A forward op's lowered result: the gated loss, plus what the backward op differentiates
    (the raw loss by the read parameters), which must not go through a gate; with batch norm,
    the statistics it normalised with (``given``: the global ones, from another op)."""

    def __init__(
        self,
        gated: Any,
        loss: Any,
        params: dict[str, Any],
        statistics: Any = None,
        given: bool = False,
    ) -> None:
        self.gated, self.loss, self.params = gated, loss, params
        self.statistics, self.given = statistics, given

    def with_gated(self, gated: Any) -> Ungated:
        return Ungated(gated, self.loss, self.params, self.statistics, self.given)


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> Ungated:
    params, (x, y) = inputs.one("parameters"), inputs.one("batch")
    statistics, given = None, inputs.optional("statistics")
    if builder.spec.batch_norm != "none":
        loss, statistics = builder.normalized_loss(params, x, y, given)
    else:
        loss = builder.model_loss(params, x, y)
    with builder.tf.control_dependencies([builder.work(op)]):
        shown = builder.tf.identity(loss, name="value")
    builder.lowered.losses[op.tower or 0] = shown
    # the gate releases ``shown``; the backward op also differentiates ``loss`` by ``params``
    return Ungated(shown, loss, params, statistics, given is not None)


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The model's every parameter must be among those read; with batch norm the loss carries
    its statistics (``given``: the global ones)."""
    params = inputs.one("parameters")
    lacking = sorted(context.trainable - params.parameters)
    if lacking:
        source = inputs.sources("parameters")[0]
        raise GraphError(
            f"op '{op.name}' (forward) computes with every parameter of the model, but "
            f"'{source.name}' ({source.kind}) gives it no {', '.join(lacking)}: make it read "
            f"the variables that hold them (add_variables makes one per parameter)"
        )
    normalises = context.spec.batch_norm != "none"
    given = normalises and inputs.optional("statistics") is not None
    return Abstract("loss", params.parameters, statistics=normalises, given=given)


FORWARD = register(
    OpKind(
        "forward",
        "The forward pass: the tower's loss on its batch (time drawn from [compute]).",
        Style("F", "blue", "#1f77b4"),
        carries_loss=True,
        provides="loss",
        needs=(one("parameters"), one("batch"), optional("statistics")),
        numpy_batch=_numpy_batch,
        lower=_lower,
        abstract=_abstract,
    )
)
