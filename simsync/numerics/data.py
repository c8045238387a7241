"""Seeded synthetic data: a dataset labelled by a hidden "teacher" model, and batches of it.

The dataset is drawn once per model and seed: Gaussian inputs; for classification, labels drawn
from the teacher's softmax at temperature 1/2; for regression, the teacher's outputs plus
Gaussian noise of standard deviation 0.1. It holds about :data:`DATASET_BYTES` of inputs (at
least 64 batches, unless that would pass :data:`MAX_DATASET_BYTES`, and at least one), cut into
blocks of one batch each.

A batch is named by a key, (client, step, position): the run of a client, and the batch's
position among that run's batches (its towers, in order). A hash of the key and the seed picks
the batch's block, as a shuffled input pipeline would, so the same key gives the same batch in
the simulator, in its replay and in the TensorFlow backend, whatever order they are consumed in,
and a batch costs a copy, not a draw.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from simsync.numerics.models import Batch, ModelSpec

__all__ = ["DATASET_BYTES", "batch_source", "dataset_blocks", "make_batch", "make_batches"]

#: The size of the synthetic dataset's inputs (float64), in bytes.
DATASET_BYTES = 4 * 2**20
#: Small batches are at least 64 to a dataset, as long as that stays below this size.
MAX_DATASET_BYTES = 64 * 2**20
_MASK = (1 << 64) - 1


@functools.lru_cache(maxsize=64)
def _teacher(spec: ModelSpec, seed: int) -> np.ndarray:
    """The hidden model that labels the data (computed once per model and seed)."""
    rng = np.random.default_rng([seed, 2])
    return rng.normal(size=(spec.features, spec.classes)) / np.sqrt(spec.features)


@functools.lru_cache(maxsize=2)
def _dataset(spec: ModelSpec, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and labels, as blocks: ``x[block]`` is one batch of inputs."""
    blocks = dataset_blocks(spec)
    rng = np.random.default_rng([seed, 3])
    x = rng.standard_normal((blocks, spec.batch_size, spec.features))
    logits = x @ _teacher(spec, seed)
    if spec.kind == "linear":
        y = logits + 0.1 * rng.standard_normal(logits.shape)
    else:
        y = _sample_classes(2.0 * logits, rng.random(logits.shape[:2]))
    x.flags.writeable = y.flags.writeable = False  # shared by every batch that uses a block
    return x, y


def dataset_blocks(spec: ModelSpec) -> int:
    """How many batches the dataset holds: about ``DATASET_BYTES`` of inputs; at least 64
    batches while they fit in ``MAX_DATASET_BYTES``, and at least one.

    >>> dataset_blocks(ModelSpec(features=32, batch_size=32))
    512
    >>> dataset_blocks(ModelSpec(features=784, batch_size=256)), dataset_blocks(
    ...     ModelSpec(features=4096, batch_size=4096))
    (41, 1)
    """
    block = 8 * spec.features * spec.batch_size
    return max(1, DATASET_BYTES // block, min(64, MAX_DATASET_BYTES // block))


def _sample_classes(logits: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """One class per row of ``logits`` (last axis), drawn from their softmax with ``uniform``.

    >>> _sample_classes(np.array([[0.0, 50.0, 0.0]]), np.array([0.3]))
    array([1])
    """
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    cumulative = np.cumsum(weights, axis=-1)
    threshold = uniform[..., None] * cumulative[..., -1:]
    classes = (cumulative <= threshold).sum(axis=-1)
    return np.minimum(classes, logits.shape[-1] - 1).astype(np.int64)


def _block(seed: int, client: int, step: int, position: int, blocks: int) -> int:
    """The block of the batch named (client, step, position): a SplitMix64 hash of the key."""
    z = (seed * 0xD1B54A32D192ED03 + client * 0x9E3779B97F4A7C15) & _MASK
    z = (z ^ (step * 0xBF58476D1CE4E5B9) ^ (position * 0x94D049BB133111EB)) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) % blocks


def make_batches(spec: ModelSpec, seed: int, client: int, step: int, count: int) -> list[Batch]:
    """The ``count`` batches of ``client``'s run ``step``, in position order.

    >>> spec = ModelSpec(kind="softmax", features=4, classes=3, batch_size=5)
    >>> three = make_batches(spec, seed=0, client=0, step=7, count=3)
    >>> three[1].x.shape, bool((three[1].x == make_batch(spec, 0, (0, 7, 1)).x).all())
    ((5, 4), True)
    """
    return batch_source(spec, seed)(client, step, count)


def batch_source(spec: ModelSpec, seed: int) -> Callable[[int, int, int], list[Batch]]:
    """:func:`make_batches` for one model and seed, ``(client, step, count) -> batches``, with
    the dataset looked up once (the replay asks for a batch per run).

    >>> spec = ModelSpec(kind="softmax", features=4, classes=3, batch_size=5)
    >>> batches = batch_source(spec, 0)
    >>> bool((batches(0, 7, 3)[2].x == make_batches(spec, 0, 0, 7, 3)[2].x).all())
    True
    """
    x, y = _dataset(spec, seed)
    blocks = len(x)

    def batches(client: int, step: int, count: int) -> list[Batch]:
        chosen = [_block(seed, client, step, position, blocks) for position in range(count)]
        return [Batch(x[b], y[b]) for b in chosen]

    return batches


def make_batch(spec: ModelSpec, seed: int, key: tuple[int, int, int]) -> Batch:
    """The batch named ``key`` = (client, step, position in the run).

    >>> spec = ModelSpec(kind="softmax", features=4, classes=3, batch_size=5)
    >>> b = make_batch(spec, seed=0, key=(0, 7, 1))
    >>> b.x.shape, b.y.dtype.kind, bool((make_batch(spec, 0, (0, 7, 1)).x == b.x).all())
    ((5, 4), 'i', True)
    """
    client, step, position = key
    x, y = _dataset(spec, seed)
    block = _block(seed, client, step, position, len(x))
    return Batch(x=x[block], y=y[block])
