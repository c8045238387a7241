"""In-graph replicated towers: the structure of TensorFlow's ``cifar10_multi_gpu_train``."""

from __future__ import annotations

import math

from simsync.ir import (
    LOCALHOST,
    Client,
    Cost,
    Device,
    Graph,
    GraphFacts,
    Link,
    Op,
    Tensor,
    Variable,
    validate,
)
from simsync.ir.limits import MIN_CORE_EFFICIENCY
from simsync.numerics import ModelSpec, parameter_shapes
from simsync.patterns.batch_norm import VARIANTS, BatchNormVariant, add_moving_statistics
from simsync.scenario import Scenario

__all__ = [
    "BYTES_PER_ELEMENT",
    "PARAMETER_DEVICE",
    "add_variables",
    "build_towers",
    "compute_cost",
    "device_graph",
    "gpu_host",
    "parameter_name",
    "tower_device",
]

#: Where variables live and gradients are averaged (``with tf.device('/cpu:0')`` in the seed).
PARAMETER_DEVICE = "/cpu:0"
#: Tensors are priced as float32, what the training being modelled would send.
BYTES_PER_ELEMENT = 4


def tower_device(tower: int) -> str:
    """The device of one tower: ``/gpu:<tower>``."""
    return f"/gpu:{tower}"


def parameter_name(variable: str) -> str:
    """The model parameter a variable holds: mirrored copies drop their ``tower_<i>/`` scope.

    >>> parameter_name("tower_3/layer_0/kernel"), parameter_name("layer_0/bias")
    ('layer_0/kernel', 'layer_0/bias')
    """
    head, _, rest = variable.partition("/")
    return rest if head.startswith("tower_") and rest else variable


def build_towers(scenario: Scenario) -> Graph:
    """Build the graph of synchronous training with one tower per device.

    The problem: one model, N devices. Each step every device should compute gradients on its
    own batch, and the variables should move once, by the average of those gradients. The tower
    loop in ``cifar10_multi_gpu_train`` does not *run* anything; it *builds* N copies of the
    model's ops, each pinned to a device, all sharing one set of variables.

    State created:

    * the model's variables: on ``/cpu:0`` (``parameter_server``), or one mirrored copy per
      device named ``tower_<i>/...`` (``allreduce``);
    * per tower ``i`` on ``/gpu:i``: ``tower_i/read_variables``, ``tower_i/dequeue``,
      ``tower_i/loss`` (forward), ``tower_i/gradients`` (backward);
    * ``parameter_server``: ``average_gradients`` and ``apply_gradients`` on ``/cpu:0``;
      ``allreduce``: one collective ``allreduce_gradients`` on all devices, then
      ``tower_i/apply_gradients`` on each.

    The protocol of one step (one ``sess.run(train_op)`` by one client):

    For every tower, independently and in parallel:

    1. Read the variables (a transfer from ``/cpu:0`` in ``parameter_server`` mode).
    2. Dequeue its own batch.
    3. Run forward (the loss) and backward (the gradients) on its device.
    4. Send the gradients on: to ``/cpu:0``, or into the all-reduce.

    Then, once:

    5. The sync point: ``average_gradients`` (or ``allreduce_gradients``) needs the gradients of
       every tower, so it starts only when the last tower's have arrived. Nothing in the
       function blocks; its inputs do.
    6. Apply the averaged gradients: the variables' version moves by one.

    Usage::

        scenario = load_scenario("examples/four_towers.toml")
        graph = build_towers(scenario)
        sync_points(graph)          # ['average_gradients']
    """
    spec = scenario.model
    graph = device_graph(scenario)
    mirrored = scenario.training.aggregation == "allreduce"
    shapes = parameter_shapes(spec)
    param_bytes = sum(math.prod(s) for s in shapes.values()) * BYTES_PER_ELEMENT
    moving = add_moving_statistics(graph, spec, PARAMETER_DEVICE)  # with batch norm
    variant = VARIANTS[spec.batch_norm]
    for tower in range(scenario.towers):
        _add_tower(graph, scenario, spec, tower, shapes, mirrored, param_bytes, moving, variant)
    if mirrored:
        _add_allreduce(graph, scenario, param_bytes)
    else:
        sources, updates = variant.build(graph, scenario, PARAMETER_DEVICE, compute_cost)
        _add_parameter_server(graph, scenario, shapes, param_bytes, sources, updates)
    graph.facts = GraphFacts(
        mode="sync",
        aggregation=scenario.training.aggregation,
        batch_norm=spec.batch_norm if moving else None,
    )
    validate(graph)
    return graph


def device_graph(scenario: Scenario, *, concurrent_parameters: bool = False) -> Graph:
    """An empty graph with the scenario's link, host cores, ``/cpu:0`` and one ``/gpu:i`` per
    device at its speed."""
    cluster = scenario.cluster
    graph = Graph(
        name=scenario.name, link=Link(cluster.link.bytes_per_second, cluster.link.latency)
    )
    if cluster.host_cores is not None:
        graph.host_cores[LOCALHOST] = cluster.host_cores
        graph.core_efficiency[LOCALHOST] = cluster.core_efficiency
    graph.add_device(Device(PARAMETER_DEVICE, kind="cpu", concurrent=concurrent_parameters))
    for tower, speed in enumerate(cluster.speeds):
        host = LOCALHOST if cluster.gpus is None else gpu_host(tower % cluster.gpus)
        graph.add_device(Device(tower_device(tower), kind="gpu", speed=speed, host=host))
    if cluster.gpus is not None:
        _share_gpus(graph, cluster.devices, cluster.gpus, cluster.gpu_contention)
    return graph


def gpu_host(gpu: int) -> str:
    """The host of physical GPU ``gpu``'s devices (its virtual GPUs) in the graph."""
    return f"gpu:{gpu}"


def _share_gpus(graph: Graph, devices: int, gpus: int, contention: float) -> None:
    """Virtual GPUs of one physical GPU share its compute as a host's cores are shared: one
    core per virtual GPU, all busy at ``1 / (1 + (n - 1) contention)`` of their speed."""
    for gpu in range(gpus):
        virtual = len(range(gpu, devices, gpus))
        if virtual > 1:
            graph.host_cores[gpu_host(gpu)] = virtual
            efficiency = 1 / (1 + (virtual - 1) * contention)
            graph.core_efficiency[gpu_host(gpu)] = max(efficiency, MIN_CORE_EFFICIENCY)


def add_variables(
    graph: Graph, shapes: dict[str, tuple[int, ...]], device: str, prefix: str
) -> tuple[str, ...]:
    """The model's variables on ``device``, named ``prefix + parameter`` (added once); each
    records the model parameter it holds."""
    names = []
    for name, shape in shapes.items():
        full = prefix + name
        if full not in graph.variables:
            nbytes = math.prod(shape) * BYTES_PER_ELEMENT
            graph.add_variable(Variable(full, device, shape, nbytes, parameter=name))
        names.append(full)
    return tuple(names)


def compute_cost(scenario: Scenario, scope: str, fraction: float) -> Cost:
    """``fraction`` of one draw of the scope's compute time: forward and backward share a draw
    per step."""
    compute = scenario.compute
    return Cost(
        compute.mean,
        compute.distribution,
        group=f"{scope}/compute",
        fraction=fraction,
        shift=compute.shift,
        sigma=compute.sigma,
        overhead=compute.overhead,
    )


def _add_tower(
    graph: Graph,
    scenario: Scenario,
    spec: ModelSpec,
    tower: int,
    shapes: dict[str, tuple[int, ...]],
    mirrored: bool,
    param_bytes: int,
    moving: tuple[str, ...],
    variant: BatchNormVariant,
) -> None:
    scope, device = f"tower_{tower}", tower_device(tower)
    costs = scenario.costs
    variables_device = device if mirrored else PARAMETER_DEVICE
    variables = add_variables(graph, shapes, variables_device, f"{scope}/" if mirrored else "")

    graph.add_op(
        Op(
            f"{scope}/read_variables",
            "read",
            variables_device,
            Cost(costs.get("read", 0.0)),
            tower=tower,
            reads=variables + moving,
        )
    )
    add_worker_body(graph, scenario, scope, device, tower, variant.share, param_bytes)


def add_worker_body(
    graph: Graph,
    scenario: Scenario,
    scope: str,
    device: str,
    tower: int,
    share: float = 1.0,
    parameter_bytes: int | None = None,
) -> None:
    """The part every pattern's tower or worker has, on its own ``device``: ``dequeue`` a
    batch, the forward pass (``loss``) and the backward pass (``gradients``), with the
    tensors between them. The caller adds what reads the variables and what takes the
    gradients; with ``parameter_bytes``, the caller's ``<scope>/read_variables`` feeds the
    loss first (the order of a loss's inputs decides ties on the critical path).
    ``share`` scales the compute (a variant's one tower working alone)."""
    spec, fraction = scenario.model, scenario.compute.forward_fraction
    dequeue = Cost(scenario.costs.get("dequeue", 0.0))
    graph.add_op(Op(f"{scope}/dequeue", "dequeue", device, dequeue, tower=tower))
    for name, kind, part in (
        ("loss", "forward", fraction),
        ("gradients", "backward", 1 - fraction),
    ):
        cost = compute_cost(scenario, scope, part * share)
        graph.add_op(Op(f"{scope}/{name}", kind, device, cost, tower=tower))
    batch_bytes = spec.batch_size * spec.features * BYTES_PER_ELEMENT
    activation_bytes = spec.batch_size * sum(spec.widths[1:]) * BYTES_PER_ELEMENT
    if parameter_bytes is not None:
        graph.add_tensor(Tensor(f"{scope}/read_variables", f"{scope}/loss", parameter_bytes))
    graph.add_tensor(Tensor(f"{scope}/dequeue", f"{scope}/loss", batch_bytes))
    graph.add_tensor(Tensor(f"{scope}/loss", f"{scope}/gradients", activation_bytes))


def _add_parameter_server(
    graph: Graph,
    scenario: Scenario,
    shapes: dict[str, tuple[int, ...]],
    param_bytes: int,
    sources: list[str],
    updates: list[str],
) -> None:
    costs = scenario.costs
    graph.add_op(
        Op("average_gradients", "aggregate", PARAMETER_DEVICE, Cost(costs.get("aggregate", 0.0)))
    )
    graph.add_op(
        Op(
            "apply_gradients",
            "apply",
            PARAMETER_DEVICE,
            Cost(costs.get("apply", 0.0)),
            writes=tuple(shapes),
        )
    )
    for source in sources:  # each tower's gradients
        graph.add_tensor(Tensor(source, "average_gradients", param_bytes))
    graph.add_tensor(Tensor("average_gradients", "apply_gradients", param_bytes))
    for update in updates:  # with tf.control_dependencies(update_ops): apply
        graph.add_tensor(Tensor(update, "apply_gradients", control=True))
    graph.add_client(
        Client("main", fetches=("apply_gradients",), overhead=costs.get("session_run", 0.0))
    )


def _add_allreduce(graph: Graph, scenario: Scenario, param_bytes: int) -> None:
    costs = scenario.costs
    devices = tuple(tower_device(t) for t in range(scenario.towers))
    graph.add_op(
        Op(
            "allreduce_gradients",
            "allreduce",
            devices[0],
            Cost(costs.get("allreduce", 0.0)),
            participants=devices,
            nbytes=param_bytes,
        )
    )
    fetches = []
    for tower, device in enumerate(devices):
        scope = f"tower_{tower}"
        writes = graph.op(f"{scope}/read_variables").reads  # the tower's mirrored variables
        graph.add_op(
            Op(
                f"{scope}/apply_gradients",
                "apply",
                device,
                Cost(costs.get("apply", 0.0)),
                tower=tower,
                writes=writes,
            )
        )
        graph.add_tensor(Tensor(f"{scope}/gradients", "allreduce_gradients", param_bytes))
        graph.add_tensor(Tensor("allreduce_gradients", f"{scope}/apply_gradients", param_bytes))
        fetches.append(f"{scope}/apply_gradients")
    graph.add_client(Client("main", fetches=tuple(fetches), overhead=costs.get("session_run", 0.0)))
