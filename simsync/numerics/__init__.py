"""Real numbers for small models (numpy): parameters, synthetic data, losses and gradients."""

from simsync.numerics.batched import backward_many, forward_many
from simsync.numerics.data import batch_source, make_batch, make_batches
from simsync.numerics.models import (
    Batch,
    ModelSpec,
    backward,
    forward,
    init_params,
    loss,
    parameter_shapes,
)

__all__ = [
    "Batch",
    "ModelSpec",
    "backward",
    "backward_many",
    "batch_source",
    "forward",
    "forward_many",
    "init_params",
    "loss",
    "make_batch",
    "make_batches",
    "parameter_shapes",
]
