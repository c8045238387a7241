"""From a scenario (or a built graph) to a finished simulation, and what it measured.

Above the two executors (:mod:`simsync.engine`, SimPy's, and TensorFlow's session in
:mod:`simsync.tf_backend`), which do not know each other: here a scenario's graph is built,
run on the engine, replayed for its values and summarised (:mod:`.simulate`, :mod:`.summary`),
several scenarios raced (:mod:`.contest`), an imported program's costs fitted to its untraced
step (:mod:`.fit`, :mod:`.importing`) and this machine's profile calibrated against
TensorFlow's runs (:mod:`.calibrate`). The last three reach TensorFlow's executor and are
imported by name, not from here.
"""

from simsync.simulation.contest import Contest, Entrant, contest, entrant_names, line_up
from simsync.simulation.results import BatchNormSummary, CriticalPath, Summary
from simsync.simulation.simulate import (
    Simulation,
    expected_updates,
    median_step_time,
    simulate,
    training_clients,
)
from simsync.simulation.summary import summary

__all__ = [
    "BatchNormSummary",
    "Contest",
    "CriticalPath",
    "Entrant",
    "Simulation",
    "Summary",
    "contest",
    "entrant_names",
    "expected_updates",
    "line_up",
    "median_step_time",
    "simulate",
    "summary",
    "training_clients",
]
