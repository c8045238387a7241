"""``apply``: one SGD step on the variables it writes; the variables' versions move by one.

The only SGD step in simsync (:func:`sgd_step`; :func:`sgd_steps` takes it for many updates
in turn, in one numpy pass), and the only rule for dropping a stale update (:func:`fresh_enough`,
as TensorFlow's ``DropStaleGradientOptimizer`` decides): the engine, the replay and the
TensorFlow lowering all use these.

Provides an **update** (no op takes it as an input). Needs one or more **gradients** when it
writes trainable variables (merged: a gradient for each of them), none when it only moves
counters (a global step). Writes trainable variables and counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simsync.errors import GraphError
from simsync.kinds.aggregate import whole_gradients
from simsync.kinds.allreduce import PerDevice
from simsync.kinds.contract import (
    Abstract,
    AbstractContext,
    BuilderLike,
    GraphContext,
    Inputs,
    OpLike,
    RunLike,
    some,
)
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["APPLY", "fresh_enough", "sgd_step", "sgd_steps"]


def sgd_step(value: Any, gradient: Any, learning_rate: Any) -> Any:
    """Plain SGD: ``value - learning_rate * gradient`` (numpy arrays or TensorFlow tensors).

    >>> sgd_step(1.0, 0.5, 0.1)
    0.95
    """
    return value - learning_rate * gradient


def sgd_steps(value: Any, gradients: Sequence[Any], learning_rate: float) -> np.ndarray:
    """:func:`sgd_step` with each of ``gradients`` in turn, each on the value the one before
    made: the values after each step, stacked, in one numpy pass (``subtract.accumulate``
    subtracts in order, so every value is bit for bit that of the step by step loop).

    >>> value, gradients = np.array([1.0, 2.0]), [np.array([0.5, 0.3]), np.array([0.7, 0.1])]
    >>> steps = sgd_steps(value, gradients, 0.1)
    >>> one = sgd_step(value, gradients[0], 0.1)
    >>> bool((steps[0] == one).all() and (steps[1] == sgd_step(one, gradients[1], 0.1)).all())
    True
    """
    terms = np.concatenate([np.asarray(value)[None], learning_rate * np.array(gradients)])
    return np.subtract.accumulate(terms)[1:]


def fresh_enough(before: Any, read: Any, max_staleness: int | None) -> Any:
    """Whether an update that read version ``read`` may land on version ``before``: at most
    ``max_staleness`` others landed in between (always, without a bound). Works on ints and on
    TensorFlow tensors alike.

    >>> fresh_enough(5, 3, 2), fresh_enough(5, 2, 2), fresh_enough(9, 0, None)
    (True, False, True)
    """
    return True if max_staleness is None else before - read <= max_staleness


def _gradients(inputs: Inputs, device: str) -> dict[str, Any]:
    """The gradients reaching the apply: one dict, or one per variable (takes), merged."""
    grads: dict[str, Any] = {}
    for value in inputs.all("gradients"):
        grads.update(value.on(device) if isinstance(value, PerDevice) else value)
    return grads


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    """The new values of the trainable variables written (the replay stores them)."""
    grads, rate = _gradients(inputs, op.device), ctx.spec.learning_rate
    return {
        v: sgd_step(ctx.current(v), grads[ctx.parameter(v)], rate)
        for v in op.writes
        if ctx.trainable(v)
    }


def _numpy_chain(
    contexts: Sequence[RunLike], ops: Sequence[OpLike], inputs: Sequence[Inputs]
) -> dict[str, Any]:
    """Applies landing one after another on the same variables (asynchronous workers'): each
    trainable variable's values after each, in one pass (:func:`sgd_steps`)."""
    ctx, rate = contexts[0], contexts[0].spec.learning_rate
    grads = [_gradients(op_inputs, op.device) for op, op_inputs in zip(ops, inputs, strict=True)]
    return {
        v: sgd_steps(ctx.current(v), [g[ctx.parameter(v)] for g in grads], rate)
        for v in ops[0].writes
        if ctx.trainable(v)
    }


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> Any:
    """Version counters before the update, the update itself, then one increment of each
    counter; with ``max_staleness`` both multiplied by whether the update is fresh enough."""
    tf = builder.tf
    grads = _gradients(inputs, op.device)
    rate = tf.constant(builder.spec.learning_rate, dtype=tf.float64)
    before = {v: builder.versions[v].read_value() for v in op.writes}
    bump = tf.constant(1, dtype=tf.int64)
    if op.max_staleness is not None:  # drop the update if too many landed since the read
        kept = fresh_enough(before[op.writes[0]], builder.read_version(op), op.max_staleness)
        builder.lowered.applied[op.name] = kept
        rate, bump = rate * tf.cast(kept, tf.float64), tf.cast(kept, tf.int64)
    with tf.control_dependencies(list(before.values())):
        # sgd_step as TensorFlow's one atomic read-modify-write, as its optimizers apply it
        updates = [
            builder.lowered.variables[v].assign_sub(rate * grads[builder.parameter(v)])
            for v in op.writes
        ]
    with tf.control_dependencies(updates):
        bumped = [builder.versions[v].assign_add(bump) for v in op.writes]
    builder.lowered.write_versions[op.name] = before
    with tf.control_dependencies(bumped):
        return {v: tf.identity(version) for v, version in before.items()}


def _writes_parameters(op: OpLike, graph: GraphContext) -> bool:
    """Whether ``op`` writes a trainable variable (then it needs gradients)."""
    return any(graph.category(v) == "trainable" for v in op.writes)


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """A gradient, from some input, for every trainable variable written."""
    held: set[str] = set()
    for value in whole_gradients(op, inputs):
        held |= value.parameters
    for variable in op.writes:
        name = context.parameter(variable)
        if context.category(variable) == "trainable" and name not in held:
            sources = ", ".join(f"'{s.name}'" for s in inputs.sources("gradients"))
            raise GraphError(
                f"op '{op.name}' (apply) writes '{variable}', but none of its gradients "
                f"({sources}) is the gradient of '{name}': add a tensor from an op whose "
                f"gradients hold it"
            )
    return Abstract("update")


APPLY = register(
    OpKind(
        "apply",
        "Apply the gradients to the variables (one SGD step); their versions move by one.",
        Style("U", "bright_green", "#98df8a"),
        cost_key="apply",
        provides="update",
        needs=(some("gradients", when=_writes_parameters),),
        may_write=frozenset({"trainable", "counter"}),
        numpy=_numpy,
        numpy_chain=_numpy_chain,
        lower=_lower,
        abstract=_abstract,
    )
)
