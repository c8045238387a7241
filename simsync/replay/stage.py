"""The replay as a stage of a simulation: a trace in, the same trace with its values out."""

from __future__ import annotations

from simsync.ir import Graph
from simsync.kinds import values_skipped
from simsync.numerics import ModelSpec
from simsync.replay.values import replay
from simsync.trace import StepRecord, Trace

__all__ = ["add_values"]


def add_values(graph: Graph, trace: Trace, model: ModelSpec, seed: int) -> None:
    """Give ``trace`` (a run of ``graph``) its values, replayed through ``model`` initialised
    from ``seed``: the parameters' and the other variables' final values, and every step's
    loss. When a ``generic`` op stands where values would pass, none are computed and
    ``trace.values_skipped`` says why (:func:`simsync.kinds.values_skipped`).

    Check the graph with the model first (:func:`simsync.kinds.check_graph`): the replay
    assumes every op has the inputs its kind needs.

    >>> from simsync.engine import Engine
    >>> from simsync.numerics import ModelSpec
    >>> from simsync.patterns import tiny_example
    >>> trace = Engine(tiny_example(), steps=2).run()
    >>> [s.loss for s in trace.steps]
    [None, None]
    >>> add_values(tiny_example(), trace, ModelSpec(), seed=0)
    >>> [s.loss is not None for s in trace.steps], sorted(trace.params)
    ([True, True], ['layer_0/bias', 'layer_0/kernel'])
    """
    skipped = values_skipped(graph)
    if skipped is not None:
        trace.values_skipped = skipped
        return
    values = replay(graph, trace, model, seed)
    trace.params = values.params
    trace.values = values.values
    losses = values.losses
    trace.steps = [
        StepRecord(client, step, start, end, losses.get((client, step)))
        for client, step, start, end, _ in trace.steps
    ]
