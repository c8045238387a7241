"""The discrete-event executor (SimPy): runs a graph's clients and emits a Trace.

The only package that imports SimPy. What builds a scenario's graph, runs it here, replays its
values and summarises it is :mod:`simsync.simulation`, above this executor and TensorFlow's.
"""

from simsync.engine.environment import CountingEnvironment
from simsync.engine.executor import Engine, run_graph

__all__ = ["CountingEnvironment", "Engine", "run_graph"]
