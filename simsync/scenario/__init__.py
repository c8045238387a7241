"""Scenarios: what to train, on which devices, in which mode (TOML files or Python)."""

from simsync.scenario.load import load_scenario, scenario_from_dict
from simsync.scenario.model import (
    ClusterConfig,
    ComputeConfig,
    LinkConfig,
    ModelConfig,
    RunConfig,
    Scenario,
    TrainingConfig,
)

__all__ = [
    "ClusterConfig",
    "ComputeConfig",
    "LinkConfig",
    "ModelConfig",
    "RunConfig",
    "Scenario",
    "TrainingConfig",
    "load_scenario",
    "scenario_from_dict",
]
