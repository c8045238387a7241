"""An op of a TensorFlow graph as plain data (in the sandbox's child): the form
:mod:`~simsync.tf_backend.program.convert` reads (:class:`~simsync.sandbox.wire.OpData`), for
a TF1 program's graph (:func:`~simsync.tf_backend.program.child.graph_data`) and a TensorFlow 2
step's (:func:`~simsync.tf_backend.program.functions.function_graph_data`)."""

from __future__ import annotations

import math
import os
from typing import Any

from simsync.tf_backend.program.capture import (
    ACCUMULATORS,
    DEQUEUES,
    ENQUEUES,
    FIFO_QUEUES,
    FUNCTION_CALLS,
    TAKES,
    calls_write,
)

__all__ = ["made_in", "op_data", "tensor_data"]


def op_data(op: Any, folder: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": op.name,
        "type": op.type,
        "device": op.device,
        "colocate": [
            group.decode()[5:] for group in op.colocation_groups() if group.startswith(b"loc:@")
        ],
        "inputs": [tensor_data(t) for t in op.inputs],
        "control": [c.name for c in op.control_inputs],
        "made_in": made_in(op, folder),
    }
    if op.type in FUNCTION_CALLS:  # whether its functions write the variables it takes
        data["calls_write"] = calls_write(op)
    if op.type in ("VarHandleOp", "VariableV2"):
        import tensorflow as tf

        shape = tf.TensorShape(op.get_attr("shape"))
        dims = shape.as_list() if shape.rank is not None else None
        data["shape"] = dims
        data["bytes"] = _nbytes(dims, op.get_attr("dtype"))
    if op.type in FIFO_QUEUES or op.type in ACCUMULATORS:
        # ops of one shared name on one device are one queue, one accumulator (the workers'
        # SyncReplicasOptimizers share the token queue and the accumulators so)
        data["shared_name"] = op.get_attr("shared_name").decode()
    if op.type in FIFO_QUEUES:
        data["capacity"] = int(op.get_attr("capacity"))
    elif op.type in TAKES:  # take_grad(R): R, if known
        import tensorflow as tf

        n = tf.get_static_value(op.inputs[1])
        data["elements"] = int(n) if n is not None else None
    elif op.type in ENQUEUES:  # enqueue_many: its components' first dimension, if known
        shape = op.inputs[1].shape
        if "Many" not in op.type:
            data["elements"] = 1
        else:
            data["elements"] = shape.as_list()[0] if shape.rank else None
    elif op.type in DEQUEUES:
        if "Many" in op.type or "UpTo" in op.type:
            import tensorflow as tf

            n = tf.get_static_value(op.inputs[1])
            data["elements"] = int(n) if n is not None else None
        else:
            data["elements"] = 1
    return data


def tensor_data(tensor: Any) -> dict[str, Any]:
    dims = tensor.shape.as_list() if tensor.shape.rank is not None else None
    return {
        "op": tensor.op.name,
        "slot": tensor.value_index,
        "shape": dims,
        "dtype": tensor.dtype.name,
        "bytes": _nbytes(dims, tensor.dtype),
    }


def _nbytes(dims: list[int | None] | None, dtype: Any) -> int | None:
    """Bytes of a tensor of this shape and type; None when the shape is not known; 0 for
    handles (a resource or a variant is no data sent)."""
    if dtype.name in ("resource", "variant", "string"):
        return 0
    if dims is None or any(d is None for d in dims):
        return None
    try:
        return int(math.prod(int(d or 0) for d in dims)) * int(dtype.size)
    except (TypeError, ValueError):
        return 0


def made_in(op: Any, folder: str) -> list[Any] | None:
    """``["train.py", 45]``: the file and line of the program's innermost frame that made
    the op (the parent reads the function off the source:
    :mod:`~simsync.tf_backend.program.made_in`)."""
    try:
        frames = op.traceback
    except Exception:
        return None
    for frame in reversed(list(frames or ())):
        filename, line, _ = _frame(frame)
        if filename and os.path.dirname(os.path.abspath(filename)) == folder:
            return [os.path.basename(filename), line]
    return None


def _frame(frame: Any) -> tuple[str, int, str]:
    if isinstance(frame, tuple):
        return str(frame[0]), int(frame[1]), str(frame[2])
    return str(frame.filename), int(frame.lineno), str(frame.name)
