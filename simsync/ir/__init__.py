"""The dataflow graph IR: ops on devices, tensors between them, client loops; and its analyses.

Knows nothing of SimPy, TensorFlow or rich.
"""

from simsync.ir.analysis import (
    Feeds,
    counter_readers,
    critical_path,
    generations,
    input_towers,
    lane_unit,
    meeting_points,
    own_tower,
    racing_clients,
    run_order,
    run_orders,
    topological_order,
    tower_dependencies,
    tower_label,
    tower_scope,
    tower_work,
    updating_clients,
)
from simsync.ir.costs import (
    communication_time,
    crosses_devices,
    expected_duration,
    op_speed,
    ring_allreduce_time,
    tensor_link,
    transfer_duration,
)
from simsync.ir.graph import Graph, natural_key
from simsync.ir.objects import (
    LOCALHOST,
    Client,
    Cost,
    Device,
    Link,
    Op,
    Resource,
    Tensor,
    Variable,
)
from simsync.ir.serialize import graph_from_dict, graph_to_dict
from simsync.ir.validate import validate

__all__ = [
    "LOCALHOST",
    "Client",
    "Cost",
    "Device",
    "Feeds",
    "Graph",
    "Link",
    "Op",
    "Resource",
    "Tensor",
    "Variable",
    "communication_time",
    "counter_readers",
    "critical_path",
    "crosses_devices",
    "expected_duration",
    "generations",
    "graph_from_dict",
    "graph_to_dict",
    "input_towers",
    "lane_unit",
    "meeting_points",
    "natural_key",
    "op_speed",
    "own_tower",
    "racing_clients",
    "ring_allreduce_time",
    "run_order",
    "run_orders",
    "tensor_link",
    "topological_order",
    "tower_dependencies",
    "tower_label",
    "tower_scope",
    "tower_work",
    "transfer_duration",
    "updating_clients",
    "validate",
]
