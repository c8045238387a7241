"""``moving_average``: batch norm's update of a moving statistic (one op per variable).

TensorFlow's v1 layer updates a moving statistic with
``assign_sub(var, (var - value) * (1 - momentum))``: the ``var`` inside the difference is read
early in the step (it waits for nothing), the subtraction lands atomically at the end. Two
towers updating one variable in the same step may therefore both read the old value, and then
their updates *add up* (:func:`race_outcomes` lists what the race allows). The replay takes
the value the run read (the run's read op saw its version) and lands the update on the
variable's latest value, as ``assign_sub`` does.

Provides an **update** (no op takes it as an input). Needs the batch **statistics**: the global
ones (``batch_statistics``), or a **loss**, which carries those its forward pass normalised
with. Writes moving statistics only.
"""

from __future__ import annotations

import itertools
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
)
from simsync.kinds.registry import OpKind, Style, register
from simsync.numerics.batch_norm import Statistics

__all__ = ["MOVING_AVERAGE", "moving_delta", "race_outcomes", "statistics_of"]


def moving_delta(read: Any, batch: Any, momentum: Any) -> Any:
    """What one update subtracts: ``(read - batch) * (1 - momentum)`` (numpy or TensorFlow).

    >>> moving_delta(1.0, 3.0, 0.75)
    -0.5
    """
    return (read - batch) * (1 - momentum)


def race_outcomes(old: Any, batches: list[Any], momentum: float) -> dict[str, Any]:
    """What a moving statistic can become when every tower's update of one step races on it:
    all read ``old`` (the updates add up: ``"sum"``), or one after another in some order of the
    towers (``"sequential 1,0"``: tower 1's update, then tower 0's). More than three towers:
    only the sum and the towers' own order; one tower: its update.

    >>> race_outcomes(0.0, [1.0, 3.0], 0.5)
    {'sum': 2.0, 'sequential 0,1': 1.75, 'sequential 1,0': 1.25}
    """
    outcomes: dict[str, Any] = {}
    if len(batches) > 1:  # one update alone races with nothing
        outcomes["sum"] = old - sum(moving_delta(old, b, momentum) for b in batches)
    towers = range(len(batches))
    orders = itertools.permutations(towers) if len(batches) <= 3 else [tuple(towers)]
    for order in orders:
        value = old
        for tower in order:
            value = value - moving_delta(value, batches[tower], momentum)
        outcomes["sequential " + ",".join(map(str, order))] = value
    return outcomes


def statistics_of(inputs: Inputs) -> Statistics:
    """The batch statistics among an op's inputs: the global ones, or a forward pass's own."""
    value = inputs.one("statistics", "loss")
    stats = value if isinstance(value, Statistics) else getattr(value, "statistics", None)
    if stats is None:
        raise GraphError(f"op '{inputs.op.name}' (moving_average) gets no batch statistics")
    return stats


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    stats, momentum = statistics_of(inputs), ctx.spec.momentum
    new = {}
    for variable in op.writes:
        name = ctx.parameter(variable)
        delta = moving_delta(stats.read[name], stats.batch[name], momentum)
        new[variable] = ctx.current(variable) - delta
    return new


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> Any:
    """The v1 layer's update: ``assign_sub`` of the delta from the value the run read early
    (in its read op, waiting for nothing), put in the ``UPDATE_OPS`` collection."""
    tf, stats = builder.tf, statistics_of(inputs)
    updates = []
    for variable in op.writes:
        name = builder.parameter(variable)
        read, batch = stats.read[name], stats.batch[name]
        delta = moving_delta(read, batch, builder.spec.momentum)
        update = builder.lowered.variables[variable].assign_sub(delta, read_value=False)
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, update)
        builder.lowered.moving.setdefault(op.name, {})[variable] = {"read": read, "batch": batch}
        updates.append(update)
    return tf.group(*updates)


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """Statistics that carry, as the run read it, every moving statistic written."""
    value, source = inputs.one("statistics", "loss"), inputs.sources("statistics", "loss")[0]
    if value.role == "loss" and not value.statistics:
        raise GraphError(
            f"op '{op.name}' (moving_average) needs batch statistics, and the loss of "
            f"'{source.name}' carries none: the model has no batch norm ([model] batch_norm)"
        )
    read = value.parameters & context.moving
    for variable in op.writes:
        name = context.parameter(variable)
        if name not in read:
            raise GraphError(
                f"op '{op.name}' (moving_average) writes '{variable}', but the statistics of "
                f"'{source.name}' ({source.kind}) carry no '{name}': write a moving statistic "
                f"of the model ({', '.join(sorted(context.moving)) or 'it has none'}) that its "
                f"run reads"
            )
    return Abstract("update")


MOVING_AVERAGE = register(
    OpKind(
        "moving_average",
        "Update a moving statistic of batch norm: assign_sub(var, (var - batch) * (1 - momentum)).",
        Style("M", "bright_blue", "#aec7e8"),
        cost_key="moving_average",
        provides="update",
        needs=(one("statistics", "loss"),),
        may_write=frozenset({"statistic"}),
        numpy=_numpy,
        lower=_lower,
        abstract=_abstract,
    )
)
