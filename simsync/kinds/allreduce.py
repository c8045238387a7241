"""``allreduce``: a collective ring all-reduce of the towers' gradients, on all their devices.

Provides the **gradients** (their mean, one copy on each participant's device). Needs one or
more **gradients**, all of the same parameters; with a model, exactly one per participant.
"""

from __future__ import annotations

from typing import Any

from simsync.errors import GraphError
from simsync.kinds.aggregate import mean_gradients, same_gradients
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

__all__ = ["ALLREDUCE", "PerDevice"]


class PerDevice(dict[str, Any]):
    """A lowered collective's result: the reduced gradients on each participant's device."""

    def on(self, device: str) -> Any:
        """The copy on ``device``; elsewhere, the first participant's (TensorFlow copies it)."""
        return self[device] if device in self else next(iter(self.values()))


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    return mean_gradients(inputs.some("gradients"))


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> PerDevice:
    return PerDevice(builder.ring_allreduce(op.devices, inputs.some("gradients")))


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The mean of one gradient per participant (a ring has one contribution per device)."""
    value = same_gradients(op, inputs)
    given, devices = len(inputs.all("gradients")), len(op.devices)
    if given != devices:
        raise GraphError(
            f"op '{op.name}' (allreduce) reduces one gradient per participant, but it has "
            f"{devices} participant(s) and {given} gradient(s): give it one tensor of gradients "
            f"from each device in participants"
        )
    return value


ALLREDUCE = register(
    OpKind(
        "allreduce",
        "Ring all-reduce of the towers' gradients among their devices.",
        Style("=", "red", "#d62728"),
        cost_key="allreduce",
        provides="gradients",
        needs=(some("gradients"),),
        numpy=_numpy,
        lower=_lower,
        abstract=_abstract,
    )
)
