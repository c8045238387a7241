"""A program's input queue: ``enqueue_elements`` (a queue runner's thread puts the elements
it made on the queue; waits while the queue is full) and ``dequeue_elements`` (a tower takes
its batch; waits while the queue holds too few).

Only a program imported as written has them (:mod:`simsync.tf_backend.program.convert`): a
``tf.queue.FIFOQueue`` becomes a queue :class:`~simsync.ir.Resource` with the program's
capacity, its ``QueueEnqueueV2``/``QueueEnqueueManyV2`` ops these enqueues, its
``QueueDequeueV2``/``QueueDequeueManyV2`` ops these dequeues, and each thread of its queue
runners a daemon client. Like ``generic`` ops, their cost comes from the program's profile,
and they compute no value here: a program's values come from its own ops
(:mod:`simsync.tf_backend.program.values`). A scenario's input pipeline is the ``dequeue``
kind, which takes a batch that is always there.
"""

from __future__ import annotations

from simsync.ir import resources
from simsync.kinds.registry import OpKind, Style, register

__all__ = ["DEQUEUE_ELEMENTS", "ENQUEUE_ELEMENTS"]

_PROGRAM = "it is a program's own queue op: the program runs it, not a scenario"

ENQUEUE_ELEMENTS = register(
    OpKind(
        "enqueue_elements",
        "Put elements (examples, batches) on the program's input queue; waits while the "
        "queue is full.",
        Style("I", "yellow", "#bd9e39"),
        action=resources.ENQUEUE,
        computes=False,
        unlowered=_PROGRAM,
    )
)

DEQUEUE_ELEMENTS = register(
    OpKind(
        "dequeue_elements",
        "Take elements (the tower's batch) from the program's input queue; waits while it "
        "holds too few.",
        Style("X", "bright_yellow", "#e7cb94"),
        action=resources.DEQUEUE_ELEMENTS,
        computes=False,
        unlowered=_PROGRAM,
    )
)
