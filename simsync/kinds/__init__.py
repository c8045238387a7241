"""Op kinds: each declared once (its meaning, look, cost key, what it does to a resource, the
role it provides and the inputs it needs, numpy rule, TensorFlow lowering), and the check that
holds a graph to them. The replay (:mod:`simsync.replay`) evaluates the numpy rules.

Importing this package registers every kind, in the order views list them (so the imports
below keep that order).
"""

# ruff: noqa: I001

from simsync.kinds import (  # noqa: F401  (each module registers its kind, in this order)
    read,
    dequeue,
    moments,
    batch_statistics,
    forward,
    moving_average,
    backward,
    aggregate,
    allreduce,
    apply,
    push_gradients,
    take_gradients,
    tokens,
    input_queue,
    generic,
)
from simsync.kinds.apply import fresh_enough, sgd_step
from simsync.kinds.graph_check import check_graph, values_skipped
from simsync.kinds.contract import Input, Inputs
from simsync.kinds.feeds import (
    Users,
    input_towers,
    resource_feeds,
    resource_users,
    sync_points,
)
from simsync.kinds.registry import KINDS, OpKind, Style, cost_keys, kind_of, providers

__all__ = [
    "KINDS",
    "Input",
    "Inputs",
    "OpKind",
    "Style",
    "Users",
    "check_graph",
    "cost_keys",
    "fresh_enough",
    "input_towers",
    "kind_of",
    "providers",
    "resource_feeds",
    "resource_users",
    "sgd_step",
    "sync_points",
    "values_skipped",
]
