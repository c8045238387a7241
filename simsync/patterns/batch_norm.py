"""Batch norm across towers: three ways to treat its statistics, added to the towers' graph.

The problem: batch norm normalises a layer with the mean and variance of the batch, and keeps
moving averages of them for inference. With N towers, whose batch? The towers' graph
(:func:`~simsync.patterns.towers.build_towers`) gets one of three variants:

* ``local`` (TensorFlow's cifar10 example, ``if i == 0``): each tower normalises with its own
  batch's statistics; only tower 0's moving-average updates are built; the apply waits for them.
* ``update_ops`` (a well-known answer: gate the step on every tower's ``UPDATE_OPS``): every
  tower updates the moving statistics, each update reading the variable early in the step; the
  apply waits for all of them. The updates race on the shared variables.
* ``synchronized``: every tower's sum and sum of squares meet at a forward sync point that
  makes the global mean and variance; every tower normalises with them; one moving-average
  update. The backward pass flows back through the global statistics: a second sync point adds
  up every tower's gradient by them before each tower finishes its first layer's gradients.

State created: ``batch_norm/moving_mean`` and ``batch_norm/moving_variance`` on ``/cpu:0``
(not trainable; every tower's ``read_variables`` reads them), ``batch_norm/gamma`` and
``batch_norm/beta`` (trainable, with the model's parameters).

The protocol of one step, ``synchronized`` (the other variants are the towers' protocol plus
the updates):

1. Each tower reads the variables, dequeues its batch and computes ``tower_i/batch_norm/moments``
   (the first half of its forward time).
2. Forward sync point: ``batch_norm/statistics`` on ``/cpu:0`` waits for every tower's sums.
3. ``batch_norm/update_moving_mean`` and ``..._variance`` update the moving statistics once;
   each tower's ``loss`` normalises with the global statistics, then ``gradients``.
4. Backward sync point: ``batch_norm/statistics_gradients`` adds up every tower's gradient by
   the statistics; each tower's ``batch_norm/moments_backward`` finishes its gradients.
5. ``average_gradients`` and ``apply_gradients`` (gated on the updates) as without batch norm.

Usage::

    scenario = load_scenario("examples/batch_norm.toml")   # batch_norm = "update_ops"
    sync_points(build_towers(scenario))                    # ['average_gradients']
    # with batch_norm = "synchronized": ['batch_norm/statistics'] (the backward barrier's
    # inputs already depend on it, so it is no sync point of its own)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simsync.ir import Cost, Graph, Op, Tensor, Variable
from simsync.numerics import ModelSpec
from simsync.numerics.batch_norm import moving_initial, moving_shapes
from simsync.scenario import Scenario

__all__ = ["VARIANTS", "BatchNormVariant", "add_moving_statistics"]

#: Tensors are priced as float32.
_BYTES = 4
#: The share of a tower's forward and backward time in the ops before the sync points.
_FIRST_LAYER_SHARE = 0.5

#: (graph, scenario, parameter device, compute cost maker) -> the ops that give the towers'
#: gradients to average (in tower order), and the updates the apply must wait for
Builder = Callable[[Graph, Scenario, str, Callable[..., Cost]], tuple[list[str], list[str]]]


@dataclass(frozen=True)
class BatchNormVariant:
    """How one variant changes the towers' graph: ``share`` is the part of each tower's forward
    and backward time its ``loss`` and ``gradients`` ops keep (the rest goes to the ops before
    the sync points); ``build`` adds the variant's ops."""

    share: float
    build: Builder


def add_moving_statistics(graph: Graph, spec: ModelSpec, device: str) -> tuple[str, ...]:
    """The moving statistics as variables on ``device`` (none without batch norm)."""
    for name, shape in moving_shapes(spec).items():
        nbytes = math.prod(shape) * _BYTES
        variable = Variable(
            name, device, shape, nbytes, trainable=False, initial=moving_initial(name)
        )
        graph.add_variable(variable)
    return tuple(moving_shapes(spec))


def _statistics_bytes(spec: ModelSpec) -> int:
    return 2 * spec.widths[1] * _BYTES


def _updates(
    graph: Graph, scenario: Scenario, device: str, scope: str, tower: int | None, source: str
) -> list[str]:
    """One moving-average update per moving statistic, from the statistics ``source`` gives."""
    names = []
    for variable in moving_shapes(scenario.model):
        name = f"{scope}update_{variable.rpartition('/')[2]}"
        cost = Cost(scenario.costs.get("moving_average", 0.0))
        graph.add_op(Op(name, "moving_average", device, cost, tower=tower, writes=(variable,)))
        graph.add_tensor(Tensor(source, name, _statistics_bytes(scenario.model) // 2))
        names.append(name)
    return names


def _none(
    graph: Graph, scenario: Scenario, device: str, cost: Callable[..., Cost]
) -> tuple[list[str], list[str]]:
    return [f"tower_{t}/gradients" for t in range(scenario.towers)], []


def _local(
    graph: Graph, scenario: Scenario, device: str, cost: Callable[..., Cost]
) -> tuple[list[str], list[str]]:
    updates = _updates(graph, scenario, device, "tower_0/batch_norm/", 0, "tower_0/loss")
    return _none(graph, scenario, device, cost)[0], updates


def _update_ops(
    graph: Graph, scenario: Scenario, device: str, cost: Callable[..., Cost]
) -> tuple[list[str], list[str]]:
    updates = []
    for tower in range(scenario.towers):
        scope = f"tower_{tower}/batch_norm/"
        updates += _updates(graph, scenario, device, scope, tower, f"tower_{tower}/loss")
    return _none(graph, scenario, device, cost)[0], updates


def _synchronized(
    graph: Graph, scenario: Scenario, device: str, cost: Callable[..., Cost]
) -> tuple[list[str], list[str]]:
    spec, costs = scenario.model, scenario.costs
    forward, rest = scenario.compute.forward_fraction, 1 - _FIRST_LAYER_SHARE
    stats_bytes = _statistics_bytes(spec)
    graph.add_op(
        Op(
            "batch_norm/statistics",
            "batch_statistics",
            device,
            Cost(costs.get("batch_statistics", 0.0)),
        )
    )
    graph.add_op(
        Op(
            "batch_norm/statistics_gradients",
            "statistics_gradients",
            device,
            Cost(costs.get("statistics_gradients", 0.0)),
        )
    )
    sources = []
    for tower in range(scenario.towers):
        scope, tower_device = f"tower_{tower}", graph.op(f"tower_{tower}/loss").device
        moments, backward = f"{scope}/batch_norm/moments", f"{scope}/batch_norm/moments_backward"
        graph.add_op(
            Op(moments, "moments", tower_device, cost(scenario, scope, forward * rest), tower=tower)
        )
        graph.add_op(
            Op(
                backward,
                "moments_backward",
                tower_device,
                cost(scenario, scope, (1 - forward) * rest),
                tower=tower,
            )
        )
        # the parameters travel to the tower once, priced on the edge read -> loss
        for src, dst in (
            (f"{scope}/read_variables", moments),
            (f"{scope}/dequeue", moments),
            (f"{scope}/gradients", backward),
            (f"{scope}/loss", backward),  # what the first layer's gradients go through
        ):
            graph.add_tensor(Tensor(src, dst, 0))
        for src, dst in (
            (moments, "batch_norm/statistics"),
            ("batch_norm/statistics", f"{scope}/loss"),
            (f"{scope}/gradients", "batch_norm/statistics_gradients"),
            ("batch_norm/statistics_gradients", backward),
        ):
            graph.add_tensor(Tensor(src, dst, stats_bytes))
        sources.append(backward)
    updates = _updates(graph, scenario, device, "batch_norm/", None, "batch_norm/statistics")
    return sources, updates


#: Each ``[model] batch_norm`` value's variant.
VARIANTS = {
    "none": BatchNormVariant(1.0, _none),
    "local": BatchNormVariant(1.0, _local),
    "update_ops": BatchNormVariant(1.0, _update_ops),
    "synchronized": BatchNormVariant(_FIRST_LAYER_SHARE, _synchronized),
}
