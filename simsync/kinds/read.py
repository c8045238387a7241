"""``read``: snapshot the variables, recording the version of each (``read_value()`` in TF).

Provides the **parameters**: the variables it reads that hold numbers, by model parameter.
Needs no input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsync.kinds.contract import (
    Abstract,
    AbstractContext,
    BuilderLike,
    Inputs,
    OpLike,
    RunLike,
)
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["READ"]


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, np.ndarray]:
    """The model parameters as the run saw them, each at the version its read recorded (runs
    that saw the same versions share one dict: their towers then batch as one)."""
    return ctx.read_parameters(op)


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    """``read_value()`` of each version counter, then of each variable: the gate then covers
    both, and a value is never older than the version recorded with it."""
    versions = {v: builder.versions[v].read_value() for v in op.reads}
    builder.lowered.read_versions[op.name] = versions
    with builder.tf.control_dependencies(list(versions.values())):
        return {builder.parameter(v): builder.lowered.variables[v].read_value() for v in op.reads}


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    """The parameters of the variables read that hold numbers (counters hold none)."""
    held = [context.parameter(v) for v in op.reads if context.category(v) != "counter"]
    return Abstract("parameters", frozenset(held))


READ = register(
    OpKind(
        "read",
        "Read the variables; the run records the version of each it saw.",
        Style("R", "cyan", "#17becf"),
        cost_key="read",
        provides="parameters",
        numpy=_numpy,
        lower=_lower,
        abstract=_abstract,
    )
)
