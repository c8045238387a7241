"""The public API: what a student or a script builds, runs and analyses graphs with.

Everything here is stable: names keep their meaning between releases (see docs/api.md, whose
examples run as tests). Build a graph of ops on devices, tensors between them, variables,
resources and clients; or let a pattern builder make one from a scenario; then ask the
analyses (sync points, critical path, run order) and simulate it.
"""

from simsync.engine import Simulation, simulate, summary
from simsync.ir import (
    Client,
    Cost,
    Device,
    Graph,
    Link,
    Op,
    Resource,
    Tensor,
    Variable,
    critical_path,
    generations,
    run_order,
    sync_points,
    topological_order,
    tower_dependencies,
    updating_clients,
)
from simsync.kinds import check_graph as validate
from simsync.numerics import ModelSpec, parameter_shapes
from simsync.patterns import (
    PARAMETER_DEVICE,
    build,
    build_async,
    build_sync_replicas,
    build_towers,
    tower_device,
    worker_name,
)
from simsync.patterns.towers import add_variables, compute_cost, device_graph
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    Scenario,
    TrainingConfig,
    load_scenario,
)

__all__ = [
    "PARAMETER_DEVICE",
    "Client",
    "ClusterConfig",
    "ComputeConfig",
    "Cost",
    "Device",
    "Graph",
    "Link",
    "ModelSpec",
    "Op",
    "Resource",
    "Scenario",
    "Simulation",
    "Tensor",
    "TrainingConfig",
    "Variable",
    "add_variables",
    "build",
    "build_async",
    "build_sync_replicas",
    "build_towers",
    "compute_cost",
    "critical_path",
    "device_graph",
    "generations",
    "load_scenario",
    "parameter_shapes",
    "run_order",
    "simulate",
    "summary",
    "sync_points",
    "topological_order",
    "tower_dependencies",
    "tower_device",
    "updating_clients",
    "validate",
    "worker_name",
]
