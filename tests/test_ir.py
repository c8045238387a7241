"""The IR: building, validation errors, and the analyses (generations, sync points, paths)."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simsync.errors import GraphError
from simsync.ir import (
    BatchFacts,
    Client,
    Cost,
    Device,
    Graph,
    GraphFacts,
    Link,
    Op,
    Tensor,
    Variable,
    critical_path,
    generations,
    graph_from_dict,
    graph_to_dict,
    run_order,
    run_orders,
    topological_order,
    tower_dependencies,
    validate,
)
from simsync.kinds import sync_points
from simsync.patterns import build, build_towers
from simsync.scenario import ClusterConfig, ComputeConfig, Scenario, TrainingConfig, load_scenario

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def towers(n: int, aggregation: str = "parameter_server", **cluster) -> Scenario:
    return Scenario(
        name="t",
        cluster=ClusterConfig(devices=n, speeds=cluster.pop("speeds", (1.0,) * n), **cluster),
        compute=ComputeConfig(mean=0.01),
        training=TrainingConfig(aggregation=aggregation),
    )


def two_op_graph() -> Graph:
    g = Graph()
    g.add_device(Device("/gpu:0"))
    g.add_op(Op("a", "forward", "/gpu:0"))
    g.add_op(Op("b", "backward", "/gpu:0"))
    g.add_tensor(Tensor("a", "b"))
    g.add_client(Client("main", ("b",)))
    return g


def test_cycle_is_named() -> None:
    g = two_op_graph()
    g.add_tensor(Tensor("b", "a"))
    with pytest.raises(GraphError, match=r"cycle: (a -> b -> a|b -> a -> b)"):
        validate(g)


def test_a_changed_graph_gets_fresh_orders() -> None:
    """Orders are computed once per graph (Graph.memo), and again once an op or tensor is
    added; callers get copies they may change."""
    g = two_op_graph()
    assert topological_order(g) == ["a", "b"] and run_order(g, ("b",)) == ["a", "b"]
    assert tower_dependencies(g) == {"a": frozenset(), "b": frozenset()}
    run_order(g, ("b",)).append("junk")
    topological_order(g).clear()
    assert run_order(g, ("b",)) == ["a", "b"] and topological_order(g) == ["a", "b"]
    g.add_op(Op("c", "apply", "/gpu:0", tower=3))
    assert sorted(topological_order(g)) == ["a", "b", "c"] and run_order(g, ("b",)) == ["a", "b"]
    g.add_tensor(Tensor("c", "a"))
    assert topological_order(g) == ["c", "a", "b"]
    assert run_orders(g, [("b",), ("c",)]) == [["c", "a", "b"], ["c"]]
    assert tower_dependencies(g)["b"] == frozenset({3})
    g.add_tensor(Tensor("b", "c"))
    with pytest.raises(GraphError, match="cycle"):
        run_order(g, ("b",))


def test_dangling_input_is_named() -> None:
    g = two_op_graph()
    with pytest.raises(GraphError, match="dangling input, no op named 'ghost'"):
        g.add_tensor(Tensor("ghost", "b"))


def test_unknown_device_lists_known_devices() -> None:
    g = two_op_graph()
    g.add_op(Op("c", "apply", "/cpu:0"))
    with pytest.raises(GraphError, match="unknown device '/cpu:0'; devices: /gpu:0"):
        validate(g)


def test_unknown_variable_and_fetch() -> None:
    g = two_op_graph()
    g.add_op(Op("c", "apply", "/gpu:0", writes=("w",)))
    with pytest.raises(GraphError, match="unknown variable 'w'"):
        validate(g)
    g.add_variable(Variable("w", "/gpu:0"))
    g.add_client(Client("other", ("nope",)))
    with pytest.raises(GraphError, match="fetches unknown op 'nope'"):
        validate(g)


def test_no_client() -> None:
    g = Graph()
    with pytest.raises(GraphError, match="no client"):
        validate(g)


def test_duplicate_op() -> None:
    g = two_op_graph()
    with pytest.raises(GraphError, match="defined twice"):
        g.add_op(Op("a", "forward", "/gpu:0"))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_parameter_server_structure(n: int) -> None:
    g = build_towers(towers(n))
    assert sync_points(g) == (["average_gradients"] if n > 1 else [])
    assert g.towers == list(range(n))
    assert sorted(g.nx.predecessors("average_gradients")) == [
        f"tower_{i}/gradients" for i in range(n)
    ]
    assert all(v.device == "/cpu:0" for v in g.variables.values())
    assert g.clients[0].fetches == ("apply_gradients",)
    assert len(run_order(g, g.clients[0].fetches)) == len(g)


def test_allreduce_structure() -> None:
    g = build_towers(towers(3, "allreduce"))
    assert sync_points(g) == ["allreduce_gradients"]
    collective = g.op("allreduce_gradients")
    assert collective.devices == ("/gpu:0", "/gpu:1", "/gpu:2")
    # every tower has its own mirrored copy of every variable, on its own device
    assert {v.device for v in g.variables.values()} == {"/gpu:0", "/gpu:1", "/gpu:2"}
    assert all(g.op(f"tower_{i}/apply_gradients").writes for i in range(3))


def test_generations_respect_dependencies() -> None:
    g = build_towers(towers(3))
    level = {op: i for i, gen in enumerate(generations(g)) for op in gen}
    for src, dst in {(t.src, t.dst) for t in g.edges()}:
        assert level[src] < level[dst]
    assert generations(g)[-1] == ["apply_gradients"]


def test_critical_path_by_hand() -> None:
    scenario = Scenario(
        name="t",
        cluster=ClusterConfig(devices=2, speeds=(1.0, 0.25)),
        compute=ComputeConfig(mean=0.01),
        costs={"aggregate": 0.001, "apply": 0.002},
    )
    path, seconds = critical_path(build_towers(scenario))
    assert path[-3:] == ["tower_1/gradients", "average_gradients", "apply_gradients"]
    assert seconds == pytest.approx(0.01 / 0.25 + 0.001 + 0.002)


def test_critical_path_counts_transfers() -> None:
    g = Graph(link=Link(bytes_per_second=1000.0, latency=0.5))
    for d in ("/cpu:0", "/gpu:0"):
        g.add_device(Device(d))
    g.add_op(Op("read", "read", "/cpu:0", Cost(1.0)))
    g.add_op(Op("loss", "forward", "/gpu:0", Cost(2.0)))
    g.add_tensor(Tensor("read", "loss", nbytes=3000))
    assert critical_path(g) == (["read", "loss"], pytest.approx(1.0 + 3.0 + 0.5 + 2.0))


@st.composite
def tower_dags(draw):
    """Random DAGs of tower chains joined at random shared ops."""
    n = draw(st.integers(1, 5))
    g = Graph()
    g.add_device(Device("/cpu:0"))
    heads = []
    for t in range(n):
        g.add_device(Device(f"/gpu:{t}"))
        length = draw(st.integers(1, 3))
        for k in range(length):
            g.add_op(Op(f"tower_{t}/op{k}", "forward", f"/gpu:{t}", tower=t))
            if k:
                g.add_tensor(Tensor(f"tower_{t}/op{k - 1}", f"tower_{t}/op{k}"))
        heads.append(f"tower_{t}/op{length - 1}")
    joins = draw(st.lists(st.sets(st.integers(0, n - 1), min_size=1), min_size=1, max_size=4))
    for j, members in enumerate(joins):
        g.add_op(Op(f"join{j}", "aggregate", "/cpu:0"))
        for t in sorted(members):
            g.add_tensor(Tensor(heads[t], f"join{j}"))
    return g, joins


@settings(max_examples=60)
@given(tower_dags())
def test_sync_points_are_joins_of_several_towers(case) -> None:
    g, joins = case
    expected = [f"join{j}" for j, members in enumerate(joins) if len(members) > 1]
    assert sorted(sync_points(g)) == sorted(expected)
    assert nx.is_directed_acyclic_graph(g.nx)


def test_a_control_edge_beside_a_data_edge_is_kept() -> None:
    from simsync.ir import Client, Device, Graph, Op, Tensor

    g = Graph()
    g.add_device(Device("/gpu:0"))
    g.add_op(Op("a", "forward", "/gpu:0"))
    g.add_op(Op("b", "backward", "/gpu:0"))
    g.add_tensor(Tensor("a", "b", nbytes=64, shape=(4, 4), dtype="float32"))
    g.add_tensor(Tensor("a", "b", control=True))
    g.add_client(Client("main", ("b",)))
    assert [t.control for t in g.tensors("a", "b")] == [False, True]
    assert g.tensor("a", "b").shape == (4, 4) and len(g.inputs("b")) == 2


def test_every_lookup_and_analysis_raises_a_graph_error() -> None:
    from simsync.errors import GraphError
    from simsync.ir import Device, Graph, Op, Tensor
    from simsync.kinds import sync_points

    g = Graph()
    g.add_device(Device("/gpu:0"))
    for name in ("a", "b"):
        g.add_op(Op(name, "forward", "/gpu:0", tower=0 if name == "a" else 1))
    with pytest.raises(GraphError, match="no tensor from 'a' to 'b'"):
        g.tensor("a", "b")
    for lookup in (g.op, g.inputs, g.device, g.variable, g.resource):
        with pytest.raises(GraphError, match=r"no .* named 'missing'"):
            lookup("missing")
    g.add_tensor(Tensor("a", "b"))
    g.add_tensor(Tensor("b", "a"))
    with pytest.raises(GraphError, match="the graph has a cycle: a -> b -> a"):
        sync_points(g)


def test_links_are_per_pair_of_hosts() -> None:
    from simsync.ir import Device, Graph, Link, Op, Tensor, transfer_duration

    g = Graph(link=Link(bytes_per_second=1e9))
    g.add_device(Device("/job:ps/task:0", host="ps"))
    g.add_device(Device("/job:worker/task:0", host="w0"))
    g.add_device(Device("/job:worker/task:1", host="w1"))
    g.set_link("ps", "w1", Link(bytes_per_second=1e6, latency=0.01))
    for name, device in (("p", "/job:ps/task:0"), ("a", "/job:worker/task:0"),
                         ("b", "/job:worker/task:1")):  # fmt: skip
        g.add_op(Op(name, "read", device))
    g.add_tensor(Tensor("p", "a", nbytes=1000))
    g.add_tensor(Tensor("p", "b", nbytes=1000))
    assert transfer_duration(g, g.tensor("p", "a")) == pytest.approx(1e-6)
    assert transfer_duration(g, g.tensor("p", "b")) == pytest.approx(0.001 + 0.01)


def _bundled(path: str):
    from pathlib import Path

    from simsync.patterns import build
    from simsync.scenario import load_scenario

    return build(load_scenario(Path(__file__).resolve().parent.parent / path))


@pytest.mark.parametrize(
    ("path", "points"),
    [
        # the tutorial's tower loop: the towers meet once, at the averaging of their gradients
        ("examples/four_towers.toml", ["average_gradients"]),
        # synchronised batch norm: the statistics of the whole batch (forward), their gradients
        # (backward), then the gradients' average: three meetings in every step
        (
            "lessons/07-batch-norm-across-towers/synchronized.toml",
            ["batch_norm/statistics", "batch_norm/statistics_gradients", "average_gradients"],
        ),
        # the apply gated on every tower's UPDATE_OPS waits for each tower's updates too
        (
            "lessons/07-batch-norm-across-towers/update_ops.toml",
            ["average_gradients", "apply_gradients"],
        ),
    ],
)
def test_every_meeting_of_towers_is_a_sync_point(path: str, points: list[str]) -> None:
    assert sync_points(_bundled(path)) == points


def test_a_meeting_after_a_meeting_is_a_sync_point_and_a_met_input_is_no_tower() -> None:
    from simsync.ir import input_towers

    g = Graph()
    for device in ("/gpu:0", "/gpu:1", "/cpu:0"):
        g.add_device(Device(device))
    for t in (0, 1):
        g.add_op(Op(f"tower_{t}/a", "forward", f"/gpu:{t}", tower=t))
        g.add_op(Op(f"tower_{t}/b", "backward", f"/gpu:{t}", tower=t))
    g.add_op(Op("first", "aggregate", "/cpu:0"))
    g.add_op(Op("second", "aggregate", "/cpu:0"))
    g.add_op(Op("after", "apply", "/cpu:0"))
    for t in (0, 1):
        g.add_tensor(Tensor(f"tower_{t}/a", "first"))
        g.add_tensor(Tensor("first", f"tower_{t}/b"))  # every tower goes on after meeting
        g.add_tensor(Tensor(f"tower_{t}/b", "second"))
    g.add_tensor(Tensor("first", "after"))
    g.add_tensor(Tensor("tower_0/b", "after"))  # one tower and an earlier meeting: no meeting
    assert sync_points(g) == ["first", "second"]
    assert input_towers(g, "second") == {"tower_0/b": 0, "tower_1/b": 1}
    assert input_towers(g, "after") == {"tower_0/b": 0}


def test_towers_are_named_by_a_scope_only_when_every_tower_has_it() -> None:
    """``worker_1/...`` on every worker names them workers; a layer's ``dense_1/`` scope on
    one tower of an imported graph names nothing (towers stay ``tower_i``)."""
    from simsync.ir import lane_unit, tower_label

    g = Graph()
    for d in ("/gpu:0", "/gpu:1"):
        g.add_device(Device(d))
    g.add_op(Op("dense_1/MatMul", "generic", "/gpu:1", tower=1))
    g.add_op(Op("loss", "generic", "/gpu:0", tower=0))
    assert lane_unit(g) == "tower" and tower_label(g, 1) == "tower_1"
    g.add_op(Op("worker_0/x", "generic", "/gpu:0", tower=0))
    g.add_op(Op("worker_1/x", "generic", "/gpu:1", tower=1))
    assert lane_unit(g) == "worker"  # the memo is dropped when an op is added


def test_a_graphs_facts_cross_a_process_boundary_whole() -> None:
    g = two_op_graph()
    batch = BatchFacts(32, ops=("a",), carry=("a", "b"), per_tower=False)
    g.facts = GraphFacts(mode="sync", global_step="step", batch=batch, session_run=2e-5)
    again = graph_from_dict(graph_to_dict(g))
    assert again.facts == g.facts  # the batch too, which a table of scalars used to drop
    assert isinstance(again.facts.batch, BatchFacts) and again.facts.batch.carry == ("a", "b")


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        ({"mode": 3}, "graph facts: mode 3: must be a string, or None"),
        ({"init_tokens": -1}, "init_tokens -1: must be an integer from 0 to 65536, or None"),
        ({"session_run": "x"}, "session_run 'x': must be a number of seconds"),
        ({"batch": {"size": 0}}, "batch: size 0: must be an integer >= 1"),
        ({"batch": [1]}, "BatchFacts: expected a table, got list"),
        ({"mood": "sync"}, "unexpected keyword argument 'mood'"),
    ],
)
def test_forged_facts_are_refused_naming_the_field(facts: dict, said: str) -> None:
    data = graph_to_dict(two_op_graph())
    data["facts"] = facts
    with pytest.raises(GraphError, match=re.escape(said)):
        graph_from_dict(data)


def test_facts_are_replaced_never_changed() -> None:
    facts = GraphFacts(mode="sync")
    with pytest.raises(AttributeError):
        facts.mode = "async"  # type: ignore[misc]
    with pytest.raises(GraphError, match="batch 'x': must be a BatchFacts"):
        GraphFacts(batch="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "mode", "said"),
    [
        ("four_towers.toml", "sync", {"aggregation": "parameter_server", "batch_norm": None}),
        ("batch_norm.toml", "sync", {"batch_norm": "update_ops"}),
        ("async_workers.toml", "async", {"apply": "locked"}),
        ("backup_worker.toml", "sync_replicas", {"replicas_to_aggregate": 3, "workers": 4}),
    ],
)
def test_each_pattern_says_its_facts(path: str, mode: str, said: dict) -> None:
    facts = build(load_scenario(EXAMPLES / path)).facts
    assert facts.mode == mode
    assert {key: getattr(facts, key) for key in said} == said
