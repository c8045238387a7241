"""``generic``: an op simsync need not understand, for timing only.

A TensorFlow graph has hundreds of op types; most matter to a simulation only by when they run
and how long they take. A ``generic`` op is exactly that: it runs on its device for its own
:class:`~simsync.ir.Cost` once its inputs have arrived, and writes the variables it names (their
versions move, as any write's do). It needs no input by role and takes any: its inputs only
order it. It provides no value, and **values are not computed through it**:

- an op of another kind that takes a tensor from a generic op cannot compute its value (it
  would need numbers the generic op does not make), and neither can anything after it;
- a generic op that writes a variable holding numbers (not a counter) leaves its value unknown.

When either happens on a graph simulated with numerics, the simulation computes no values at
all rather than wrong ones: the losses are ``None``, the parameters stay empty, and the summary
says why under ``values_skipped`` (:func:`simsync.kinds.graph_check.values_skipped`). The timing is
the same as ever. A generic op whose tensors go only to other generic ops, or that only waits
for ops with values (a summary of the loss), changes no value. The TensorFlow backend lowers it
as a no-op that waits for its inputs; it refuses a graph whose values would go through one.
"""

from __future__ import annotations

from typing import Any

from simsync.kinds.contract import BuilderLike, Inputs, OpLike
from simsync.kinds.registry import CATEGORIES, OpKind, Style, register

__all__ = ["GENERIC"]


def _lower(builder: BuilderLike, op: OpLike, inputs: Inputs) -> Any:
    """A no-op: under the op's scope it waits for its inputs, and computes nothing."""
    return builder.tf.no_op(name="wait")


GENERIC = register(
    OpKind(
        "generic",
        "An op simsync need not understand: it takes its own cost once its inputs are there, "
        "and computes no value (timing only).",
        Style("O", "white", "#7f7f7f"),
        may_write=frozenset(CATEGORIES),
        computes=False,
        lower=_lower,
    )
)
