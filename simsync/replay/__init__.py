"""The replay: the values of a run, computed afterwards from its trace.

The stage between the engine (or TensorFlow), which decides when every read, write, push and
take happened, and everything that reads values: :func:`add_values` gives a simulated trace
its values (what :func:`simsync.simulation.simulate` calls after the engine's run);
:func:`replay` computes them for any trace, TensorFlow's own ledger included (the cross-checks
call it). Op kinds' numpy rules (:mod:`simsync.kinds`) say what each op computes; the replay
says in which order, and with which versions.
"""

from simsync.replay.context import RunContext
from simsync.replay.stage import add_values
from simsync.replay.values import Replayed, replay

__all__ = ["Replayed", "RunContext", "add_values", "replay"]
