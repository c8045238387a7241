"""``aggregate``: the mean of the towers' gradients (``average_gradients``), a sync point.

Provides the **gradients** (their mean). Needs one or more **gradients**, all of the same
parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simsync.errors import GraphError
from simsync.kinds.contract import (
    Abstract,
    AbstractContext,
    BuilderLike,
    Inputs,
    OpLike,
    RunLike,
    some,
)
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["AGGREGATE", "mean_gradients", "whole_gradients"]


def mean_gradients(grads: list[dict[str, Any]]) -> dict[str, Any]:
    """The element-wise mean of several gradient dicts, in their given order.

    >>> mean_gradients([{"w": np.array([1.0])}, {"w": np.array([3.0])}])
    {'w': array([2.])}
    """
    return {name: _mean([g[name] for g in grads]) for name in grads[0]}


#: A gradient at least this large (bytes) is worth checking whether the towers' gradients are
#: the rows of one array (about a microsecond per tower); a smaller one is stacked again faster.
LARGE_GRADIENT = 16384


def _mean(arrays: list[Any]) -> Any:
    """The mean of ``arrays``; when they are large and the rows of one stacked array, in order
    (the towers of one batched backward pass), that array's mean, without stacking them again.
    Either way the same numbers: a batched pass's arrays are laid out as the stacked copy is."""
    base = getattr(arrays[0], "base", None)
    if (
        base is not None
        and arrays[0].nbytes >= LARGE_GRADIENT
        and len(base) == len(arrays)
        and all(a.base is base for a in arrays)
    ):
        start, stride = base.__array_interface__["data"][0], base.strides[0]
        rows = [a.__array_interface__["data"][0] for a in arrays]
        if rows == [start + i * stride for i in range(len(arrays))]:
            return base.mean(axis=0)
    return np.mean(arrays, axis=0)


def whole_gradients(op: OpLike, inputs: Inputs) -> list[Abstract]:
    """The abstract gradients among ``inputs``, none of them partial (a partial gradient, of a
    loss normalised with global statistics, is finished by ``moments_backward`` first)."""
    grads = inputs.all("gradients")
    for source, value in zip(inputs.sources("gradients"), grads, strict=True):
        if value.partial:
            raise GraphError(
                f"op '{op.name}' ({op.kind}) takes whole gradients, but those of "
                f"'{source.name}' ({source.kind}) still lack the part through batch norm's "
                f"global statistics: take them from its moments_backward op instead"
            )
    return grads


def same_gradients(op: OpLike, inputs: Inputs) -> Abstract:
    """The abstract mean of ``inputs``' gradients: whole ones, all of the same parameters."""
    grads = whole_gradients(op, inputs)
    sources = inputs.sources("gradients")
    for source, value in zip(sources[1:], grads[1:], strict=True):
        if value.parameters != grads[0].parameters:
            raise GraphError(
                f"op '{op.name}' ({op.kind}) averages gradients of the same parameters, but "
                f"'{sources[0].name}' gives {_names(grads[0])} and '{source.name}' gives "
                f"{_names(value)}: feed it gradients of the same variables"
            )
    return Abstract("gradients", grads[0].parameters)


def _names(value: Abstract) -> str:
    return ", ".join(sorted(value.parameters)) or "none"


def _numpy(ctx: RunLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    return mean_gradients(inputs.some("gradients"))


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> dict[str, Any]:
    tf, grads = builder.tf, inputs.some("gradients")
    return {name: tf.add_n([g[name] for g in grads]) / len(grads) for name in grads[0]}


def _abstract(op: OpLike, inputs: Inputs, context: AbstractContext) -> Abstract:
    return same_gradients(op, inputs)


AGGREGATE = register(
    OpKind(
        "aggregate",
        "Average the towers' gradients (average_gradients).",
        Style("A", "green", "#2ca02c"),
        cost_key="aggregate",
        provides="gradients",
        needs=(some("gradients"),),
        numpy=_numpy,
        lower=_lower,
        abstract=_abstract,
    )
)
