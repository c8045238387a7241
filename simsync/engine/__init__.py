"""The discrete-event engine (SimPy): runs a graph's clients and emits a Trace.

The only package that imports SimPy.
"""

from simsync.engine.contest import Contest, Entrant, contest
from simsync.engine.environment import CountingEnvironment
from simsync.engine.executor import Engine
from simsync.engine.results import BatchNormSummary, CriticalPath, Summary
from simsync.engine.simulate import (
    Simulation,
    expected_updates,
    median_step_time,
    simulate,
    summary,
    training_clients,
)

__all__ = [
    "BatchNormSummary",
    "Contest",
    "CountingEnvironment",
    "CriticalPath",
    "Engine",
    "Entrant",
    "Simulation",
    "Summary",
    "contest",
    "expected_updates",
    "median_step_time",
    "simulate",
    "summary",
    "training_clients",
]
