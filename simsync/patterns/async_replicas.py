"""Asynchronous replicas: N client threads running ``sess.run(train_op)`` on shared variables."""

from __future__ import annotations

import math

from simsync.ir import Client, Cost, Graph, GraphFacts, Op, Tensor, validate
from simsync.numerics import parameter_shapes
from simsync.patterns.towers import (
    BYTES_PER_ELEMENT,
    PARAMETER_DEVICE,
    add_variables,
    add_worker_body,
    device_graph,
    tower_device,
)
from simsync.scenario import Scenario

__all__ = ["PARAMETERS_LOCK", "build_async", "worker_name"]

#: The mutex of a locked apply: one critical section around every read and every apply.
PARAMETERS_LOCK = "parameters"


def worker_name(worker: int) -> str:
    """The name scope and client of one worker: ``worker_<i>``."""
    return f"worker_{worker}"


def build_async(scenario: Scenario) -> Graph:
    """Build the graph of asynchronous SGD: one train op per worker, no coordination.

    The problem: N devices should all train one model, and nobody should wait for anybody.
    Each worker is a client thread calling ``sess.run(train_op)`` in a loop on one shared
    session, its train op pinned to its own device (the seed's multi-GPU variant). The
    variables are shared, so a worker computes its gradient from the version it read, and by
    the time it applies it, other workers may have applied theirs: the update is *stale*.

    State created:

    * the model's variables on ``/cpu:0``, a concurrent device (TensorFlow's CPU runs many
      small ops at once); with ``apply = "locked"`` a lock, ``parameters``;
    * per worker ``i`` (scope ``worker_i``): ``read_variables`` and ``apply_gradients`` on
      ``/cpu:0`` (TensorFlow colocates them with the variables), ``dequeue``, ``loss`` and
      ``gradients`` on ``/gpu:i``;
    * one client per worker, ``worker_i``, fetching ``worker_i/apply_gradients``; together
      they make ``[run] steps`` updates per worker, like threads that stop at a global step
      limit, so a fast worker makes more updates than a straggler.

    The protocol of one update (one ``sess.run`` by worker ``i``), every worker on its own:

    1. If ``staleness_bound`` s is set, wait until every worker has finished k - s updates
       (stale-synchronous parallel; s = 0 gives rounds like synchronous training).
    2. Read the variables, recording their version (under the lock, if locked).
    3. Dequeue a batch, run forward and backward on ``/gpu:i``.
    4. Apply: if ``max_staleness`` m is set and more than m updates landed since the read,
       drop the gradient; otherwise subtract it and bump the version (under the lock, if
       locked). Staleness = version at apply - version read - 1.

    Usage::

        scenario = load_scenario("examples/async_workers.toml")
        graph = build_async(scenario)
        Engine(graph, steps=100).run().updates   # the ledger (no values: see simulate)
    """
    training, costs = scenario.training, scenario.costs
    graph = device_graph(scenario, concurrent_parameters=True)
    shapes = parameter_shapes(scenario.model)
    variables = add_variables(graph, shapes, PARAMETER_DEVICE, "")
    param_bytes = sum(math.prod(s) for s in shapes.values()) * BYTES_PER_ELEMENT
    locks = (PARAMETERS_LOCK,) if training.apply == "locked" else ()
    for worker in range(scenario.towers):
        scope = worker_name(worker)
        add_worker_body(graph, scenario, scope, tower_device(worker), worker)
        graph.add_op(
            Op(
                f"{scope}/read_variables",
                "read",
                PARAMETER_DEVICE,
                Cost(costs.get("read", 0.0)),
                tower=worker,
                reads=variables,
                locks=locks,
            )
        )
        graph.add_op(
            Op(
                f"{scope}/apply_gradients",
                "apply",
                PARAMETER_DEVICE,
                Cost(costs.get("apply", 0.0)),
                tower=worker,
                writes=variables,
                locks=locks,
                max_staleness=training.max_staleness,
            )
        )
        graph.add_tensor(Tensor(f"{scope}/read_variables", f"{scope}/loss", param_bytes))
        graph.add_tensor(Tensor(f"{scope}/gradients", f"{scope}/apply_gradients", param_bytes))
        graph.add_client(
            Client(
                scope,
                fetches=(f"{scope}/apply_gradients",),
                overhead=costs.get("session_run", 0.0),
                staleness_bound=training.staleness_bound,
                shared_steps=True,
            )
        )
    graph.facts = GraphFacts(mode="async", apply=training.apply)
    validate(graph)
    return graph
