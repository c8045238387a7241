"""The public API: what a student or a script builds, runs and analyses graphs with.

Everything here is stable: names keep their meaning between releases (see docs/api.md, whose
examples run as tests). Build a graph of ops on devices, tensors between them, variables,
resources and clients; or let a pattern builder make one from a scenario; then ask the
analyses (sync points, critical path, run order) and simulate it.

Each op kind has a constant here, its name in capitals (``FORWARD == "forward"``), made from
the one registry of kinds (:mod:`simsync.kinds`): ``Op("loss", FOWARD, "/gpu:0")`` is a
``NameError`` on the line that has the typo, where the string ``"foward"`` would be found only
when the graph is checked.
"""

from __future__ import annotations

from dataclasses import fields

from simsync.engine.executor import StepCallback
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
    topological_order,
    tower_dependencies,
    updating_clients,
)
from simsync.kinds import KINDS, sync_points
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
from simsync.simulation import Simulation, summary
from simsync.simulation import simulate as simulate_scenario
from simsync.simulation.user_program import WhatIf, program_summary, simulate_program


class Result(Simulation):
    """What :func:`simulate` returns: a :class:`Simulation` (``.scenario``, ``.graph``,
    ``.trace``, ``.sync_points``) that shows itself in a notebook: the last expression of a
    Jupyter cell draws its summary table, its timeline and its graph."""

    def _repr_html_(self) -> str:
        from simsync.viz.notebook import simulation_html

        return simulation_html(summary(self), self.graph, self.trace, self.sync_points)


def simulate(
    target: Graph | Scenario,
    *,
    graph: Graph | None = None,
    steps: int | None = None,
    seed: int | None = None,
    numerics: bool = True,
    on_step: StepCallback | None = None,
    detail: bool = True,
) -> Result:
    """Run a graph, or a scenario's graph, on the simulator.

    ``simulate(graph, steps=10)`` runs a graph you built: every client that has no ``steps``
    of its own runs 10 times, and values (when ``numerics`` is on) come from the default
    :class:`ModelSpec`. ``simulate(scenario)`` builds the scenario's graph and runs it for the
    scenario's ``[run] steps``; ``simulate(scenario, graph=g)`` runs ``g`` with the scenario's
    settings and model instead.

    Parameters
    ----------
    target : Graph or Scenario
        What to run.
    graph : Graph, optional
        With a scenario only: the graph to run in place of the one its pattern builds.
    steps : int, optional
        Runs per client (the scenario's ``[run] steps``); default: the scenario's, 100 for a
        graph.
    seed : int, optional
        The seed of every random draw (the scenario's ``[run] seed``); default: the
        scenario's, 0 for a graph.
    numerics : bool, optional
        Compute the model's values (losses, parameters) as well as the timing; default True.
    on_step : callable, optional
        Called after every step with the step's record (a progress bar).
    detail : bool, optional
        Keep every op's record in the trace; False keeps only steps and the ledger.

    Returns
    -------
    Result
        A :class:`Simulation`: ``.graph``, ``.trace`` and ``.sync_points``; :func:`summary`
        reads it, and a notebook shows it (summary table, timeline, graph).

    Raises
    ------
    GraphError
        If the graph cannot run (:func:`validate` names the first problem; with
        ``numerics`` it also asks what values need).
    ScenarioError
        If the scenario, or ``steps`` or ``seed``, is not what a scenario file allows.
    SimulationError
        If the run can never finish (a deadlock): who waits for what.
    TypeError
        If ``target`` is neither a graph nor a scenario, or a graph is given twice.

    Examples
    --------
    >>> g = Graph(name="one-tower")
    >>> g.add_device(Device("/gpu:0"))
    >>> loss = g.add_op(Op("loss", FORWARD, "/gpu:0", Cost(0.004), tower=0))
    >>> gradients = g.add_op(Op("gradients", BACKWARD, "/gpu:0", Cost(0.006), tower=0))
    >>> g.connect(loss, gradients)
    >>> g.add_client(Client("main", fetches=("gradients",)))
    >>> facts = summary(simulate(g, steps=3, numerics=False))
    >>> facts["scenario"], facts["towers"], facts["steps"], round(facts["step_time"]["mean"], 6)
    ('one-tower', 1, 3, 0.01)
    """
    if isinstance(target, Graph):
        if graph is not None:
            raise TypeError("simulate(graph, graph=...): give the graph once")
        scenario, graph = Scenario(target.name), target
    elif isinstance(target, Scenario):
        scenario = target
    else:
        raise TypeError(f"simulate takes a Graph or a Scenario, not {target!r}")
    if steps is not None or seed is not None:
        scenario = scenario.with_run(steps=steps, seed=seed)
    sim = simulate_scenario(
        scenario, graph=graph, numerics=numerics, on_step=on_step, detail=detail
    )
    return Result(**{field.name: getattr(sim, field.name) for field in fields(sim)})


# One constant per registered kind, made from the registry: adding a kind adds its constant.
_KIND_CONSTANTS = {name.upper(): name for name in KINDS}
for _constant, _kind in _KIND_CONSTANTS.items():
    if not _constant.isidentifier() or _constant in globals():
        raise ImportError(f"op kind '{_kind}' cannot have the constant {_constant} in simsync.api")
    globals()[_constant] = _kind

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
    "Result",
    "Scenario",
    "Simulation",
    "Tensor",
    "TrainingConfig",
    "Variable",
    "WhatIf",
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
    "program_summary",
    "run_order",
    "simulate",
    "simulate_program",
    "summary",
    "sync_points",
    "topological_order",
    "tower_dependencies",
    "tower_device",
    "updating_clients",
    "validate",
    "worker_name",
    *_KIND_CONSTANTS,
]
