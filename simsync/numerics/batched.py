"""Many towers' forward and backward passes at once: the replay's fast path.

Towers that read the same version of the variables share one parameter set, so their batches
stack into one array and every layer is one matrix product for all of them; towers that read
different versions stack their parameters too. The numbers are those of
:func:`~simsync.numerics.models.forward` and :func:`~simsync.numerics.models.backward` (up to
the last bits of floating-point rounding), tower by tower.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsync.numerics.models import (
    Batch,
    ModelSpec,
    Softmax,
    loss_of_output,
    output_gradient,
    softmax_parts,
)

__all__ = ["Stacked", "backward_many", "forward_many"]

Params = dict[str, np.ndarray]


class Stacked:
    """What a batched forward pass keeps for the backward pass: stacked activations (and, for
    cross-entropy, the softmax both passes use)."""

    __slots__ = ("activations", "params", "parts", "shared", "y")

    def __init__(
        self,
        params: Any,
        shared: bool,
        activations: list[np.ndarray],
        y: Any,
        parts: Softmax | None = None,
    ) -> None:
        self.params, self.shared, self.activations, self.y = params, shared, activations, y
        self.parts = parts


def _stack(arrays: list[np.ndarray]) -> np.ndarray:
    """Arrays of one shape stacked on a new first axis: ``np.stack``, in a third of the time
    for many small arrays."""
    return np.array(arrays)


def _stack_params(spec: ModelSpec, params: list[Params]) -> tuple[Params, bool]:
    """One parameter set if all towers read the same one, else every parameter stacked."""
    first = params[0]
    if all(p is first for p in params):
        return first, True
    return {name: _stack([p[name] for p in params]) for name in first}, False


def forward_many(
    spec: ModelSpec, params: list[Params], batches: list[Batch]
) -> tuple[list[float], list[tuple[Stacked, int]]]:
    """Each tower's loss, and a handle on its activations for :func:`backward_many`.

    >>> from simsync.numerics import forward, init_params, make_batch
    >>> spec = ModelSpec(kind="mlp", features=4, classes=3, hidden=(5,))
    >>> p = init_params(spec, 0)
    >>> b = [make_batch(spec, 0, (0, 0, t)) for t in range(3)]
    >>> losses, _ = forward_many(spec, [p, p, p], b)
    >>> [round(l - forward(spec, p, x)[0], 12) for l, x in zip(losses, b)]
    [0.0, 0.0, 0.0]
    """
    stacked, shared = _stack_params(spec, params)
    h = _stack([b.x for b in batches])
    activations = [h]
    layers = len(spec.widths) - 1
    for layer in range(layers):
        kernel, bias = stacked[f"layer_{layer}/kernel"], stacked[f"layer_{layer}/bias"]
        h = h @ kernel + (bias if shared else bias[:, None, :])
        if layer < layers - 1:
            h = np.maximum(h, 0.0)
        activations.append(h)
    y = _stack([b.y for b in batches])
    parts = None if spec.kind == "linear" else softmax_parts(h)
    losses = loss_of_output(spec, h, y, parts)
    group = Stacked(stacked, shared, activations, y, parts)
    return [float(v) for v in losses], [(group, i) for i in range(len(batches))]


def backward_many(spec: ModelSpec, forwards: list[Any]) -> list[Params]:
    """Each tower's gradients, from the values :func:`forward_many` made (``forwards`` hold
    ``.activations`` = ``(Stacked, index)``). Towers of one stacked group, in order, are done in
    one pass; others are restacked."""
    handles = [f.activations for f in forwards]
    group = handles[0][0]
    if not all(g is group for g, _ in handles) or [i for _, i in handles] != list(
        range(len(group.activations[0]))
    ):
        params = [f.params for f in forwards]
        _, handles = forward_many(spec, params, [f.batch for f in forwards])
        group = handles[0][0]
    return _gradients(spec, group)


def _gradients(spec: ModelSpec, group: Stacked) -> list[Params]:
    layers = len(spec.widths) - 1
    activations, params, shared = group.activations, group.params, group.shared
    grad_out = output_gradient(spec, activations[-1], group.y, group.parts)
    grads: dict[str, np.ndarray] = {}
    for layer in reversed(range(layers)):
        inputs = activations[layer]
        grads[f"layer_{layer}/kernel"] = np.matmul(inputs.transpose(0, 2, 1), grad_out)
        grads[f"layer_{layer}/bias"] = grad_out.sum(axis=1)
        if layer > 0:
            kernel = params[f"layer_{layer}/kernel"]
            back = kernel.T if shared else kernel.transpose(0, 2, 1)
            grad_out = (grad_out @ back) * (inputs > 0)
    names = [f"layer_{layer}/{part}" for layer in range(layers) for part in ("kernel", "bias")]
    return [{name: grads[name][i] for name in names} for i in range(len(group.y))]
