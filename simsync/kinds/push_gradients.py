"""``push_gradients``: a worker's gradient for one variable, pushed to that variable's
ConditionalAccumulator with the worker's local step (``accumulator.apply_grad(g, local_step)``).

Accepted only if the local step is not below the accumulator's step; otherwise silently dropped
(that is how SyncReplicasOptimizer drops stale gradients). It never blocks.

Provides a **pushed gradient** (it goes to the accumulator, not to an op). Needs one
**gradients**, holding the gradient of the variable named by ``gradient``.
"""

from __future__ import annotations

from typing import Any

from simsync.errors import GraphError
from simsync.ir.resources import PUSH
from simsync.kinds.aggregate import whole_gradients
from simsync.kinds.contract import Abstract, AbstractContext, Inputs, OpLike, RunLike, one
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["PUSH_GRADIENTS"]


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    """The pushed gradient: the one of ``op.gradient`` among the worker's gradients."""
    grads = inputs.one("gradients")
    name = ctx.parameter(str(op.gradient))
    return {name: grads[name]}


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The gradient of ``op.gradient``, which its gradients must hold."""
    (grads,) = whole_gradients(op, inputs)
    if op.gradient is None:
        raise GraphError(
            f"op '{op.name}' (push_gradients) names no variable whose gradient it pushes: "
            f"set gradient= (Op(..., gradient='layer_0/kernel'))"
        )
    name = context.parameter(op.gradient)
    if name not in grads.parameters:
        source = inputs.sources("gradients")[0]
        raise GraphError(
            f"op '{op.name}' (push_gradients) pushes the gradient of '{name}', but "
            f"'{source.name}' ({source.kind}) gives none: feed it gradients that hold it"
        )
    return Abstract("pushed gradient", frozenset({name}))


PUSH_GRADIENTS = register(
    OpKind(
        "push_gradients",
        "Push a gradient to its variable's accumulator, tagged with the local step "
        "(dropped if stale).",
        Style("P", "bright_magenta", "#e377c2"),
        cost_key="push_gradients",
        action=PUSH,
        provides="pushed gradient",
        needs=(one("gradients"),),
        numpy=_numpy,
        abstract=_abstract,
        unlowered="it runs on a real cluster with SyncReplicasOptimizer, not in one session",
    )
)
