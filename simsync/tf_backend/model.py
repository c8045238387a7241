"""The numpy models of :mod:`simsync.numerics.models`, written again in TensorFlow ops.

Same parameters (by name), same loss formulas, float64 throughout; gradients come from
``tf.gradients``. The cross-check compares the two, so any difference here would show.
"""

from __future__ import annotations

from typing import Any

from simsync.numerics import ModelSpec

__all__ = ["model_loss"]


def model_loss(tf: Any, spec: ModelSpec, params: dict[str, Any], x: Any, y: Any) -> Any:
    """The mean loss of the model on a batch (``x``: batch x features; ``y``: labels or targets)."""
    layers = len(spec.widths) - 1
    h = x
    for layer in range(layers):
        h = tf.matmul(h, params[f"layer_{layer}/kernel"]) + params[f"layer_{layer}/bias"]
        if layer < layers - 1:
            h = tf.nn.relu(h)
    if spec.kind == "linear":
        return 0.5 * tf.reduce_mean(tf.reduce_sum(tf.square(h - y), axis=1))
    shifted = h - tf.reduce_max(h, axis=1, keepdims=True)
    log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=1, keepdims=True))
    picked = tf.gather(log_probs, y, axis=1, batch_dims=1)
    return -tf.reduce_mean(picked)
