"""``take_gradients``: the chief takes the mean gradient from one accumulator
(``accumulator.take_grad(R)``).

Blocks until at least R gradients were accepted, then returns the mean of *all* accumulated
(TensorFlow's ``TakeGradLockedHelper`` divides by its counter), resets the count and bumps the
accumulator's step, so every gradient still in flight with the old local step will be dropped.

Provides the **gradients** (of the one variable its accumulator's pushes hold). Needs no input:
what it averages comes through its accumulator.
"""

from __future__ import annotations

from typing import Any

from simsync.errors import GraphError
from simsync.ir.resources import TAKE
from simsync.kinds.aggregate import mean_gradients
from simsync.kinds.contract import Abstract, AbstractContext, Inputs, OpLike, RunLike
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["TAKE_GRADIENTS"]


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    return mean_gradients(ctx.taken(op))


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The gradient its accumulator's pushes all push: exactly one variable's."""
    resource = str(op.resource)
    if op.amount < 1:
        raise GraphError(
            f"op '{op.name}' (take_gradients) averages amount={op.amount} gradients: set "
            f"amount to the R it waits for, 1 or more"
        )
    pushes = context.pushes(resource)
    pushed = {context.parameter(p.gradient) for p in pushes if p.gradient is not None}
    if len(pushed) != 1:
        what = ", ".join(sorted(pushed)) if pushed else "nothing"
        raise GraphError(
            f"op '{op.name}' (take_gradients) averages one variable's gradients, but the "
            f"push_gradients ops of accumulator '{resource}' push {what}: push one "
            f"parameter's gradient to each accumulator"
        )
    return Abstract("gradients", frozenset(pushed))


TAKE_GRADIENTS = register(
    OpKind(
        "take_gradients",
        "Take the mean of R or more accepted gradients from an accumulator (blocks until "
        "there are R).",
        Style("T", "bright_cyan", "#9edae5"),
        cost_key="take_gradients",
        action=TAKE,
        provides="gradients",
        numpy=_numpy,
        abstract=_abstract,
        unlowered="it runs on a real cluster with SyncReplicasOptimizer, not in one session",
    )
)
