"""Assignment 1: the tower loop and average_gradients.

Build the graph TensorFlow's multi-GPU example builds: one tower per GPU, each reading the
shared variables, dequeuing its own batch and computing its loss and gradients; then one op
that averages the towers' gradients, and one that applies the average.
"""

from simsync.api import (
    AGGREGATE,
    APPLY,
    BACKWARD,
    DEQUEUE,
    FORWARD,
    PARAMETER_DEVICE,
    READ,
    Client,
    Cost,
    Graph,
    Op,
    Scenario,
    add_variables,
    compute_cost,
    device_graph,
    parameter_shapes,
    tower_device,
)


# ## Task 1.1: the tower loop
def add_tower(graph: Graph, scenario: Scenario, tower: int, variables: tuple[str, ...]) -> str:
    """Add tower ``tower``'s ops and return the name of its gradients op.

    Four ops, named ``tower_<i>/read_variables`` (kind ``READ``, on /cpu:0, reading
    ``variables``), ``tower_<i>/dequeue`` (kind ``DEQUEUE``), ``tower_<i>/loss`` (kind
    ``FORWARD``) and ``tower_<i>/gradients`` (kind ``BACKWARD``), the last three on
    ``tower_device(tower)``. Every op has ``tower=tower``. The loss needs the variables and
    the batch; the gradients need the loss. The forward pass takes
    ``compute_cost(scenario, scope, f)`` with ``f = scenario.compute.forward_fraction``, the
    backward pass the rest (``1 - f``). ``graph.add_op(op)`` returns the op, and
    ``graph.connect(a, b, c)`` adds a tensor from ``a`` to ``b`` and one from ``b`` to ``c``.
    """
    # TODO: Implement for Task 1.1.
    raise NotImplementedError("Task 1.1: add_tower is not written yet")


# ## Task 1.2: average_gradients
def average_gradients(graph: Graph, tower_gradients: list[str]) -> str:
    """Add ``average_gradients`` (kind ``AGGREGATE``, on /cpu:0), fed by every tower's
    gradients, and return its name."""
    # TODO: Implement for Task 1.2.
    raise NotImplementedError("Task 1.2: average_gradients is not written yet")


# Given: the graph of one training step, built with your two functions.
def build(scenario: Scenario) -> Graph:
    graph = device_graph(scenario)
    variables = add_variables(graph, parameter_shapes(scenario.model), PARAMETER_DEVICE, "")
    gradients = [add_tower(graph, scenario, t, variables) for t in range(scenario.towers)]
    average = average_gradients(graph, gradients)
    apply = graph.add_op(Op("apply_gradients", APPLY, PARAMETER_DEVICE, Cost(), writes=variables))
    graph.connect(average, apply, nbytes=272)
    graph.add_client(Client("main", fetches=("apply_gradients",)))
    return graph


# Given: the towers alone (Task 1.1's checks use it), one client fetching every tower.
def tower_graph(scenario: Scenario) -> Graph:
    graph = device_graph(scenario)
    variables = add_variables(graph, parameter_shapes(scenario.model), PARAMETER_DEVICE, "")
    gradients = [add_tower(graph, scenario, t, variables) for t in range(scenario.towers)]
    graph.add_client(Client("main", fetches=tuple(gradients)))
    return graph
