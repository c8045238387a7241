"""The numpy models of :mod:`simsync.numerics.models`, written again in TensorFlow ops.

Same parameters (by name), same loss formulas, float64 throughout; gradients come from
``tf.gradients``. The cross-check compares the two, so any difference here would show. Batch
norm is built from plain TensorFlow ops (``tf.nn.moments``: the biased variance), as
:mod:`simsync.numerics.batch_norm` computes it.
"""

from __future__ import annotations

from typing import Any

from simsync.numerics import ModelSpec
from simsync.numerics.batch_norm import BETA, GAMMA, Statistics, moving_shapes

__all__ = ["model_loss", "normalized_loss", "pre_activation"]


def model_loss(tf: Any, spec: ModelSpec, params: dict[str, Any], x: Any, y: Any) -> Any:
    """The mean loss of the model on a batch (``x``: batch x features; ``y``: labels or targets)."""
    return _output_loss(tf, spec, _layers(tf, spec, params, x, 0), y)


def pre_activation(tf: Any, params: dict[str, Any], x: Any) -> Any:
    """Batch norm's input: the first layer's ``x W + b``."""
    return tf.matmul(x, params["layer_0/kernel"]) + params["layer_0/bias"]


def normalized_loss(
    tf: Any,
    spec: ModelSpec,
    params: dict[str, Any],
    x: Any,
    y: Any,
    given: Statistics | None,
) -> tuple[Any, Statistics]:
    """The mean loss with batch norm after the first hidden layer, normalising with ``given``
    statistics or the batch's own; and the statistics used."""
    z = pre_activation(tf, params, x)
    if given is None:
        mean, variance = tf.nn.moments(z, axes=[0])
        read = {name: params[name] for name in moving_shapes(spec)}
        given = Statistics(mean, variance, spec.batch_size, read)
    normalized = (z - given.mean) / tf.sqrt(given.variance + spec.epsilon)
    h = tf.nn.relu(params[GAMMA] * normalized + params[BETA])
    return _output_loss(tf, spec, _layers(tf, spec, params, h, 1), y), given


def _layers(tf: Any, spec: ModelSpec, params: dict[str, Any], h: Any, first: int) -> Any:
    layers = len(spec.widths) - 1
    for layer in range(first, layers):
        h = tf.matmul(h, params[f"layer_{layer}/kernel"]) + params[f"layer_{layer}/bias"]
        if layer < layers - 1:
            h = tf.nn.relu(h)
    return h


def _output_loss(tf: Any, spec: ModelSpec, h: Any, y: Any) -> Any:
    if spec.kind == "linear":
        return 0.5 * tf.reduce_mean(tf.reduce_sum(tf.square(h - y), axis=1))
    shifted = h - tf.reduce_max(h, axis=1, keepdims=True)
    log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=1, keepdims=True))
    picked = tf.gather(log_probs, y, axis=1, batch_dims=1)
    return -tf.reduce_mean(picked)
