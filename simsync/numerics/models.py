"""Small numpy models whose gradients the simulator really computes.

Three kinds, chosen to be tiny and exact: ``linear`` regression (mean squared error),
``softmax`` regression (cross-entropy) and an ``mlp`` (ReLU hidden layers, cross-entropy).
Parameters are float64 arrays in a dict; names follow TensorFlow's ``scope/kernel`` style so
the TensorFlow backend can build the same variables.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "Batch",
    "ModelSpec",
    "Softmax",
    "backward",
    "forward",
    "init_params",
    "loss",
    "loss_of_output",
    "output_gradient",
    "parameter_shapes",
    "softmax_parts",
]

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class ModelSpec:
    """What to train: the model's shape and the SGD step size."""

    kind: str = "softmax"
    features: int = 32
    classes: int = 10
    hidden: tuple[int, ...] = (64,)
    batch_size: int = 32
    learning_rate: float = 0.1
    #: batch norm after the first hidden layer (mlp): "none", or how towers share statistics
    batch_norm: str = "none"
    momentum: float = 0.99
    epsilon: float = 1e-3

    @property
    def widths(self) -> list[int]:
        """Layer widths from input to output."""
        inner = list(self.hidden) if self.kind == "mlp" else []
        return [self.features, *inner, self.classes]


class Batch(NamedTuple):
    """Inputs ``x`` (batch x features) and targets ``y`` (class ids, or values for linear).
    A named tuple: the replay makes one per run and tower."""

    x: np.ndarray
    y: np.ndarray


def parameter_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the model's variables, in creation order.

    >>> parameter_shapes(ModelSpec(kind="mlp", features=4, classes=3, hidden=(5,)))
    {'layer_0/kernel': (4, 5), 'layer_0/bias': (5,), 'layer_1/kernel': (5, 3), 'layer_1/bias': (3,)}
    """
    widths = spec.widths
    shapes: dict[str, tuple[int, ...]] = {}
    for layer, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        shapes[f"layer_{layer}/kernel"] = (fan_in, fan_out)
        shapes[f"layer_{layer}/bias"] = (fan_out,)
        if layer == 0 and spec.batch_norm != "none" and len(widths) > 2:
            shapes["batch_norm/gamma"] = shapes["batch_norm/beta"] = (fan_out,)
    return shapes


def init_params(spec: ModelSpec, seed: int) -> Params:
    """Glorot-uniform kernels and zero biases, from ``seed``.

    >>> p = init_params(ModelSpec(features=4, classes=3), seed=0)
    >>> p["layer_0/kernel"].shape, float(p["layer_0/bias"].sum())
    ((4, 3), 0.0)
    """
    rng = np.random.default_rng([seed, 1])
    params: Params = {}
    for name, shape in parameter_shapes(spec).items():
        if name.endswith("kernel"):
            limit = np.sqrt(6.0 / (shape[0] + shape[1]))
            params[name] = rng.uniform(-limit, limit, size=shape)
        elif name.endswith("gamma"):  # batch norm's scale starts at 1
            params[name] = np.ones(shape)
        else:
            params[name] = np.zeros(shape)
    return params


def forward(spec: ModelSpec, params: Params, batch: Batch) -> tuple[float, list[np.ndarray]]:
    """The loss on ``batch`` and the activations the backward pass needs."""
    layers = len(spec.widths) - 1
    activations = [batch.x]
    h = batch.x
    for layer in range(layers):
        h = h @ params[f"layer_{layer}/kernel"] + params[f"layer_{layer}/bias"]
        if layer < layers - 1:
            h = np.maximum(h, 0.0)
        activations.append(h)
    return float(loss_of_output(spec, h, batch.y)), activations


def loss(spec: ModelSpec, params: Params, batch: Batch) -> float:
    """The loss alone.

    >>> spec = ModelSpec(kind="softmax", features=4, classes=3)
    >>> from simsync.numerics.data import make_batch
    >>> params, batch = init_params(spec, 0), make_batch(spec, seed=0, key=(0, 0, 0))
    >>> loss(spec, params, batch) == forward(spec, params, batch)[0] > 0
    True
    """
    return forward(spec, params, batch)[0]


def backward(
    spec: ModelSpec, params: Params, batch: Batch, activations: list[np.ndarray]
) -> Params:
    """Gradients of the mean loss with respect to every parameter (manual backprop)."""
    layers = len(spec.widths) - 1
    grad_out = output_gradient(spec, activations[-1], batch.y)
    grads: Params = {}
    for layer in reversed(range(layers)):
        inputs = activations[layer]
        grads[f"layer_{layer}/kernel"] = inputs.T @ grad_out
        grads[f"layer_{layer}/bias"] = grad_out.sum(axis=0)
        if layer > 0:
            grad_out = (grad_out @ params[f"layer_{layer}/kernel"].T) * (inputs > 0)
    return {name: grads[name] for name in params}


class Softmax(NamedTuple):
    """What the cross-entropy and its gradient share: the logits less their row maximum, their
    exponentials and the rows' sums of those (computed once for both)."""

    shifted: np.ndarray
    weights: np.ndarray
    total: np.ndarray


def softmax_parts(output: np.ndarray) -> Softmax:
    """The :class:`Softmax` of ``output`` (its last axis holds the classes)."""
    shifted = output - output.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return Softmax(shifted, weights, weights.sum(axis=-1, keepdims=True))


def loss_of_output(
    spec: ModelSpec, output: np.ndarray, y: np.ndarray, parts: Softmax | None = None
) -> Any:
    """The mean loss of ``output`` (examples x outputs) against ``y``; with leading axes
    (towers x examples x outputs), one loss per tower. ``parts``: ``softmax_parts(output)``,
    if already computed.

    >>> spec = ModelSpec(kind="softmax", features=2, classes=2)
    >>> out, y = np.zeros((3, 2)), np.array([0, 1, 1])
    >>> round(float(loss_of_output(spec, out, y)), 4), loss_of_output(spec, np.stack([out] * 2),
    ...                                                               np.stack([y] * 2)).shape
    (0.6931, (2,))
    """
    if spec.kind == "linear":
        return 0.5 * np.mean(np.sum((output - y) ** 2, axis=-1), axis=-1)
    shifted, _, total = softmax_parts(output) if parts is None else parts
    # the log-probabilities of the targets only: shifted - log(total), where y points
    picked = np.take_along_axis(shifted, y[..., None], axis=-1)[..., 0] - np.log(total)[..., 0]
    return -np.mean(picked, axis=-1)


def output_gradient(
    spec: ModelSpec, output: np.ndarray, y: np.ndarray, parts: Softmax | None = None
) -> np.ndarray:
    """The gradient of :func:`loss_of_output` by ``output`` (with the same leading axes);
    ``parts`` as there."""
    n = output.shape[-2]
    if spec.kind == "linear":
        return (output - y) / n
    _, weights, total = softmax_parts(output) if parts is None else parts
    probs = weights / total
    picked = np.take_along_axis(probs, y[..., None], axis=-1)
    np.put_along_axis(probs, y[..., None], picked - 1.0, axis=-1)
    return probs / n
