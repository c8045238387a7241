"""The hostile user of the API: random small graphs (any kind, unknown ones too; random edges,
devices, variables, resources and clients), simulated with and without numerics. Whatever the
graph, the run ends, or stops with a ``GraphError`` (the graph is wrong) or a
``SimulationError`` (it can never finish): never another exception, never a hang.

Bounded (and derandomized) so it adds well under half a minute.
"""

from __future__ import annotations

from typing import Any

from helpers import watchdog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simsync.api import (
    Client,
    ClusterConfig,
    ComputeConfig,
    Cost,
    Device,
    Graph,
    Op,
    Resource,
    Scenario,
    Tensor,
    TrainingConfig,
    Variable,
    add_variables,
    build,
    parameter_shapes,
    simulate,
    summary,
)
from simsync.errors import GraphError, SimulationError
from simsync.ir import graph_from_dict, graph_to_dict
from simsync.kinds import KINDS, check_graph
from simsync.scenario import ModelConfig

SCENARIO = Scenario("fuzz", cluster=ClusterConfig(devices=2)).with_run(steps=2)
KIND_NAMES = [*KINDS, "foward", "MatMul"]
DEVICES = ["/cpu:0", "/gpu:0", "/gpu:1"]
RESOURCES = ["tokens", "grads"]
SECONDS = 20


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    graph = Graph(name="fuzz")
    for name in DEVICES:
        graph.add_device(Device(name, kind="cpu" if "cpu" in name else "gpu"))
    variables = add_variables(graph, parameter_shapes(SCENARIO.model), "/cpu:0", "")
    graph.add_variable(Variable("global_step", "/cpu:0", trainable=False))
    graph.add_variable(Variable("moving", "/cpu:0", (3,), trainable=False, initial=0.0))
    names = [*variables, "global_step", "moving"]
    graph.add_resource(Resource("tokens", "queue", "/cpu:0", initial=draw(st.integers(0, 2))))
    graph.add_resource(Resource("grads", "accumulator", "/cpu:0"))
    count = draw(st.integers(1, 7))
    ops = [f"op_{i}" for i in range(count)]
    for name in ops:
        kind = draw(st.sampled_from(KIND_NAMES))
        group = draw(st.sampled_from([None, "g0", "g1"]))
        cost = Cost(draw(st.sampled_from([0.0, 0.001, 0.003])), "exponential" if group else
                    "constant", group=group)  # fmt: skip
        collective = kind == "allreduce" and draw(st.booleans())
        graph.add_op(
            Op(
                name,
                kind,
                draw(st.sampled_from(DEVICES)) if draw(st.integers(0, 19)) else "/tpu:9",
                cost,
                tower=draw(st.sampled_from([None, 0, 1])),
                reads=tuple(draw(st.lists(st.sampled_from(names), max_size=3, unique=True))),
                writes=tuple(draw(st.lists(st.sampled_from(names), max_size=2, unique=True))),
                participants=("/gpu:0", "/gpu:1") if collective else (),
                resource=draw(st.sampled_from([None, None, *RESOURCES])),
                amount=draw(st.integers(0, 2)),
                gradient=draw(st.sampled_from([None, *names])),
                max_staleness=draw(st.sampled_from([None, 0, 2])),
            )
        )
    for i, src in enumerate(ops):
        for dst in ops[i + 1 :]:
            if draw(st.integers(0, 2)) == 0:
                graph.add_tensor(Tensor(src, dst, draw(st.sampled_from([0, 64])),
                                        control=draw(st.booleans())))  # fmt: skip
    if count > 1 and draw(st.integers(0, 9)) == 0:  # now and then a cycle
        graph.add_tensor(Tensor(ops[-1], ops[0]))
    for c in range(draw(st.integers(1, 2))):
        fetches = draw(st.lists(st.sampled_from(ops), min_size=1, max_size=3, unique=True))
        graph.add_client(
            Client(
                f"client_{c}",
                tuple(fetches),
                steps=draw(st.sampled_from([None, 1, 3])),
                staleness_bound=draw(st.sampled_from([None, 0, 1])),
                shared_steps=draw(st.booleans()),
                daemon=c > 0 and draw(st.booleans()),
            )
        )
    return graph


def _base(mode: str = "sync", **settings: Any) -> Scenario:
    model = ModelConfig(kind="mlp", features=4, classes=3, hidden=(5,), batch_size=4,
                        batch_norm=settings.pop("batch_norm", "none"))  # fmt: skip
    return Scenario(
        mode,
        cluster=ClusterConfig(devices=2),
        compute=ComputeConfig(mean=0.001),
        model=model,
        training=TrainingConfig(mode=mode, **settings),
    ).with_run(steps=2)


#: the graphs the patterns build, each with its scenario: where the fuzz starts its mutations
BASES = [
    (scenario, graph_to_dict(build(scenario)))
    for scenario in (
        _base(),
        _base(aggregation="allreduce"),
        _base("async", max_staleness=1),
        _base("sync_replicas", replicas_to_aggregate=1),
        _base(batch_norm="update_ops"),
        _base(batch_norm="synchronized"),
    )
]


@st.composite
def mutants(draw: st.DrawFn) -> tuple[Scenario, dict[str, Any]]:
    """A pattern's graph with one to three mutations: an op of another kind, a tensor lost, a
    tensor added (data or control), other variables written or read, another resource, a
    generic op in the way."""
    scenario, base = draw(st.sampled_from(BASES))
    data = {key: list(value) if isinstance(value, list) else value for key, value in base.items()}
    ops, names = data["ops"], [op["name"] for op in data["ops"]]
    variables = [v["name"] for v in data["variables"]]
    for _ in range(draw(st.integers(1, 3))):
        change = draw(st.integers(0, 6))
        at = draw(st.integers(0, len(ops) - 1))
        if change == 0:
            ops[at] = {**ops[at], "kind": draw(st.sampled_from(KIND_NAMES))}
        elif change == 1 and data["tensors"]:
            del data["tensors"][draw(st.integers(0, len(data["tensors"]) - 1))]
        elif change == 2:
            src, dst = sorted(draw(st.lists(st.sampled_from(names), min_size=2, max_size=2)))
            data["tensors"].append({"src": src, "dst": dst, "control": draw(st.booleans())})
        elif change == 3:
            key = draw(st.sampled_from(["reads", "writes"]))
            ops[at] = {**ops[at], key: draw(st.lists(st.sampled_from(variables), max_size=2))}
        elif change == 4:
            ops[at] = {**ops[at], "gradient": draw(st.sampled_from([None, *variables])),
                       "amount": draw(st.integers(0, 2))}  # fmt: skip
        elif change == 5:
            resources = [None, *(r["name"] for r in data["resources"])]
            ops[at] = {**ops[at], "resource": draw(st.sampled_from(resources))}
        else:
            ops.append({"name": "MatMul", "kind": "generic", "device": ops[at]["device"]})
            names = [*names, "MatMul"] if "MatMul" not in names else names
            data["tensors"].append({"src": names[at], "dst": "MatMul"})
            data["tensors"].append({"src": "MatMul", "dst": draw(st.sampled_from(names))})
    return scenario, data


@settings(
    max_examples=800,
    derandomize=True,  # the same graphs every run: CI cannot fail by chance
    deadline=None,  # the watchdog bounds each example instead
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(graphs(), st.booleans())
def test_any_graph_simulates_or_is_one_graph_or_simulation_error(
    graph: Graph, numerics: bool
) -> None:
    try:
        with watchdog(SECONDS):
            timing = lambda g: check_graph(g, values=False)  # noqa: E731
            again = graph_from_dict(graph_to_dict(graph), check=timing)
            summary(simulate(SCENARIO, graph=again, numerics=numerics))
    except (GraphError, SimulationError) as error:
        assert str(error) and "\n" not in str(error)


@settings(
    max_examples=1000,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(mutants())
def test_any_mutant_of_a_patterns_graph_simulates_with_values_or_is_one_clear_error(
    mutant: tuple[Scenario, dict[str, Any]],
) -> None:
    scenario, data = mutant
    try:
        with watchdog(SECONDS):
            graph = graph_from_dict(data)
            summary(simulate(scenario, graph=graph))
    except (GraphError, SimulationError) as error:
        assert str(error) and "\n" not in str(error)
