"""Ring all-reduce in plain TensorFlow ops, chunk by chunk between devices.

Every tower's gradients are flattened into one vector and cut into ``n`` chunks. Then:

1. Reduce-scatter, ``n - 1`` steps: at step ``s`` device ``d`` sends chunk ``(d - s) mod n`` to
   device ``d + 1``, which adds it to its own. Device ``d`` ends with the full sum of chunk
   ``(d + 1) mod n``.
2. All-gather, ``n - 1`` steps: at step ``s`` device ``d`` sends chunk ``(d + 1 - s) mod n`` to
   device ``d + 1``, which keeps it. Every device ends with every summed chunk.
3. Each device divides by ``n`` and cuts the vector back into the gradients' shapes.

``2 (n - 1)`` steps, each moving ``1/n`` of the bytes: the cost the simulator charges.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ring_allreduce"]


def ring_allreduce(
    tf: Any, ir_devices: tuple[str, ...], mapping: dict[str, str], grads: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The mean of ``grads`` (one dict per device, in ``ir_devices`` order) on every device."""
    n, names = len(ir_devices), list(grads[0])
    devices = [mapping[d] for d in ir_devices]
    shapes = [g.shape for g in (grads[0][name] for name in names)]
    sizes = [math.prod(int(dim) for dim in shape) for shape in shapes]
    chunk = -(-sum(sizes) // n)
    chunks = []
    for device, tower_grads in zip(devices, grads, strict=True):
        with tf.device(device):
            flat = tf.concat([tf.reshape(tower_grads[name], [-1]) for name in names], 0)
            padded = tf.pad(flat, [[0, chunk * n - sum(sizes)]])
            chunks.append(tf.split(padded, n))
    for step in range(n - 1):  # 1. reduce-scatter
        chunks = _ring_step(tf, devices, chunks, lambda d, s=step: (d - s) % n, add=True)
    for step in range(n - 1):  # 2. all-gather
        chunks = _ring_step(tf, devices, chunks, lambda d, s=step: (d + 1 - s) % n, add=False)
    result = {}
    for ir_device, device, pieces in zip(ir_devices, devices, chunks, strict=True):
        with tf.device(device):  # 3. mean, reshape
            mean = tf.concat(pieces, 0)[: sum(sizes)] / n
            parts = tf.split(mean, sizes)
            result[ir_device] = {
                name: tf.reshape(part, shape)
                for name, part, shape in zip(names, parts, shapes, strict=True)
            }
    return result


def _ring_step(
    tf: Any, devices: list[str], chunks: list[list[Any]], sent: Any, add: bool
) -> list[list[Any]]:
    n = len(devices)
    new = [list(pieces) for pieces in chunks]
    for d in range(n):
        c, receiver = sent(d), (d + 1) % n
        with tf.device(devices[receiver]):
            incoming = tf.identity(chunks[d][c])
            new[receiver][c] = chunks[receiver][c] + incoming if add else incoming
    return new
