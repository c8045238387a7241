"""The one protocol of an executor: a graph in, the :class:`~simsync.trace.Trace` of running it
out.

Two executors keep it, siblings that do not know each other: SimPy's
(:func:`simsync.engine.run_graph`, and the reference one a learner can read,
:func:`simsync.engine.reference.run_reference`) and TensorFlow's session
(:func:`simsync.tf_backend.session.execute.tensorflow_executor`, made for a scenario's model).
What builds the graph, replays its values and compares two traces sits above both
(:mod:`simsync.simulation`, :mod:`simsync.crosscheck`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from simsync.ir import Graph
    from simsync.trace.events import Trace

__all__ = ["Executor"]


class Executor(Protocol):
    """Runs every client of ``graph`` for ``steps`` steps, its draws seeded by ``seed``, and
    returns the trace of when everything happened."""

    def __call__(self, graph: Graph, steps: int, seed: int) -> Trace: ...
