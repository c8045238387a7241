"""Building a graph by hand through ``simsync.api``, as students do: kind constants made from
the registry, ``add_op`` returning the op, ``connect`` for a chain of tensors, and
``simulate(graph, steps=...)`` without a scenario, summarised from the graph."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simsync.api as api
from simsync.api import (
    AGGREGATE,
    BACKWARD,
    FORWARD,
    Client,
    ClusterConfig,
    ComputeConfig,
    Cost,
    Device,
    Graph,
    Op,
    Scenario,
    Tensor,
    build_towers,
    simulate,
    summary,
    topological_order,
)
from simsync.errors import GraphError, ScenarioError
from simsync.kinds import KINDS


# -- kind constants ----------------------------------------------------------------------------
def test_every_registered_kind_has_its_constant_and_nothing_else_is_one() -> None:
    constants = {name: getattr(api, name) for name in api.__all__ if getattr(api, name) in KINDS}
    assert constants == {kind.upper(): kind for kind in KINDS}
    assert (FORWARD, BACKWARD, AGGREGATE) == ("forward", "backward", "aggregate")


def test_a_kind_registered_before_the_api_is_imported_gets_a_constant() -> None:
    # the constants are made from the registry, not listed a second time
    code = textwrap.dedent(
        """
        from simsync.kinds.registry import OpKind, Style, register
        register(OpKind("all_gather", "gathers", Style("G", "white", "#ffffff")))
        from simsync.api import *
        print(ALL_GATHER)
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "all_gather"


def test_a_misspelt_kind_constant_is_a_name_error_where_it_is_written() -> None:
    namespace: dict[str, object] = {}
    exec("from simsync.api import *", namespace)
    assert namespace["FORWARD"] == "forward"
    with pytest.raises(NameError, match="FOWARD"):
        exec('Op("loss", FOWARD, "/gpu:0")', namespace)


# -- add_op and connect --------------------------------------------------------------------------
def ops(graph: Graph, *names: str) -> list[Op]:
    return [graph.add_op(Op(name, FORWARD, "/gpu:0")) for name in names]


def test_add_op_returns_the_op_it_added() -> None:
    g = Graph()
    op = Op("loss", FORWARD, "/gpu:0", Cost(0.004))
    assert g.add_op(op) is op
    assert g.op("loss") is op


@pytest.mark.parametrize(
    ("method", "wrong", "expected"),
    [
        ("add_op", "loss", "an Op"),
        ("add_device", "/gpu:0", "a Device"),
        ("add_variable", ("w", "/cpu:0"), "a Variable"),
        ("add_resource", None, "a Resource"),
        ("add_client", ("main",), "a Client"),
        ("add_tensor", ("a", "b"), "a Tensor"),
    ],
)
def test_adding_something_else_says_what_to_make(method: str, wrong: object, expected: str) -> None:
    with pytest.raises(GraphError, match=rf"^{method} takes {expected}, not .*: make one with"):
        getattr(Graph(), method)(wrong)


def test_connect_adds_a_chain_of_tensors_each_with_the_bytes_given() -> None:
    g = Graph()
    a, _, c = ops(g, "a", "b", "c")
    g.connect(a, "b", c, nbytes=512)  # ops or their names
    assert [(t.src, t.dst, t.nbytes, t.control) for t in g.edges()] == [
        ("a", "b", 512, False),
        ("b", "c", 512, False),
    ]
    g.connect("a", "c", control=True)
    assert [t.control for t in g.tensors("a", "c")] == [True]
    assert topological_order(g) == ["a", "b", "c"]


def test_connect_changes_what_the_graph_remembers_of_its_structure() -> None:
    g = Graph()
    ops(g, "a", "b")
    g.connect("a", "b")
    assert topological_order(g) == ["a", "b"]
    ops(g, "c")
    g.connect("c", "a")
    assert topological_order(g) == ["c", "a", "b"]


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        (("a",), "connect needs two ops or more, got 1"),
        (("a", "b", "missing"), "tensor b -> missing: dangling input, no op named 'missing'"),
        (("a", "b", "a", "b"), "data tensor a -> b is defined twice"),
        (("b", "c"), "data tensor b -> c is defined twice"),
    ],
)
def test_connect_adds_nothing_when_one_tensor_of_the_chain_is_refused(
    chain: tuple[str, ...], message: str
) -> None:
    g = Graph()
    ops(g, "a", "b", "c")
    g.connect("b", "c")
    with pytest.raises(GraphError) as raised:
        g.connect(*chain)
    assert str(raised.value) == message
    assert [(t.src, t.dst) for t in g.edges()] == [("b", "c")]


def test_connect_refuses_bytes_a_tensor_refuses() -> None:
    g = Graph()
    ops(g, "a", "b")
    with pytest.raises(GraphError, match=r"^tensor a -> b: nbytes -1: must be"):
        g.connect("a", "b", nbytes=-1)
    assert list(g.edges()) == []


NAMES = st.sampled_from(["a", "b", "c", "d", "missing"])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    existing=st.lists(st.tuples(NAMES, NAMES, st.booleans()), max_size=4),
    chain=st.lists(NAMES, max_size=5),
    control=st.booleans(),
)
def test_connect_either_adds_its_whole_chain_or_nothing(
    existing: list[tuple[str, str, bool]], chain: list[str], control: bool
) -> None:
    g = Graph()
    ops(g, "a", "b", "c", "d")
    for src, dst, ctrl in existing:
        with contextlib.suppress(GraphError):  # a pair already joined, an op not there
            g.add_tensor(Tensor(src, dst, control=ctrl))
    before = [(t.src, t.dst, t.control) for t in g.edges()]
    try:
        g.connect(*chain, nbytes=8, control=control)
    except GraphError:
        assert [(t.src, t.dst, t.control) for t in g.edges()] == before
        return
    added = [(src, dst, control) for src, dst in itertools.pairwise(chain)]
    assert sorted([(t.src, t.dst, t.control) for t in g.edges()]) == sorted(before + added)


# -- simulate(graph, ...) and its summary ----------------------------------------------------------
def two_towers(distribution: str = "constant") -> Graph:
    """Two towers, the second on a GPU half as fast, meeting at average_gradients."""
    g = Graph(name="two-towers")
    g.add_device(Device("/cpu:0", kind="cpu"))
    g.add_device(Device("/gpu:0"))
    g.add_device(Device("/gpu:1", speed=0.5))
    average = g.add_op(Op("average_gradients", AGGREGATE, "/cpu:0"))
    for tower in (0, 1):
        gpu = f"/gpu:{tower}"
        cost = Cost(0.01, distribution, group=f"tower_{tower}", fraction=0.4)
        loss = g.add_op(Op(f"tower_{tower}/loss", FORWARD, gpu, cost, tower=tower))
        cost = Cost(0.01, distribution, group=f"tower_{tower}", fraction=0.6)
        grads = g.add_op(Op(f"tower_{tower}/gradients", BACKWARD, gpu, cost, tower=tower))
        g.connect(loss, grads, average)
    g.add_client(Client("main", fetches=("average_gradients",)))
    return g


def test_a_hand_built_graph_is_summarised_from_the_graph() -> None:
    facts = summary(simulate(two_towers(), steps=4, numerics=False))
    assert facts["scenario"] == "two-towers"
    assert facts["towers"] == 2
    assert facts["updating_clients"] == 0  # nothing writes a variable: every run is a step
    assert facts["steps"] == 4
    # the slow tower's 10 ms of work at half speed, every step
    assert facts["step_time"]["mean"] == pytest.approx(0.02)
    assert facts["waited_for"]["average_gradients"] == {"tower_0": 0, "tower_1": 4}


def test_a_graph_whose_ops_name_no_tower_is_one_tower() -> None:
    g = Graph(name="one-gpu")
    g.add_device(Device("/gpu:0"))
    forward = g.add_op(Op("f", FORWARD, "/gpu:0", Cost(0.005)))
    g.connect(forward, g.add_op(Op("b", BACKWARD, "/gpu:0", Cost(0.005))))
    g.add_client(Client("main", fetches=("b",)))
    facts = summary(simulate(g, steps=2, numerics=False))
    assert (facts["towers"], facts["steps"]) == (1, 2)
    assert facts["step_time"]["mean"] == pytest.approx(0.01)


def test_steps_and_seed_of_a_graph_are_the_scenarios_run_settings() -> None:
    graph = two_towers("exponential")
    one = simulate(graph, steps=6, seed=1, numerics=False).trace.steps
    again = simulate(graph, steps=6, seed=1, numerics=False).trace.steps
    other = simulate(graph, steps=6, seed=2, numerics=False).trace.steps
    assert len(one) == 6
    assert [s.duration for s in one] == [s.duration for s in again]
    assert [s.duration for s in one] != [s.duration for s in other]
    assert len(simulate(graph, numerics=False).trace.steps) == 100  # a scenario's default


def test_simulate_with_a_scenario_still_runs_its_graph_or_the_one_given() -> None:
    four = Scenario("four", cluster=ClusterConfig(devices=4), compute=ComputeConfig(mean=0.01))
    own = simulate(four, steps=3)
    given_graph = simulate(four, graph=build_towers(four), steps=3, seed=0)
    assert len(own.trace.steps) == len(given_graph.trace.steps) == 3
    assert [s.loss for s in own.trace.steps] == [s.loss for s in given_graph.trace.steps]
    assert summary(own)["towers"] == 4
    assert simulate(four.with_run(steps=2)).scenario.run.steps == 2


def test_simulate_says_what_it_takes() -> None:
    graph = two_towers()
    with pytest.raises(TypeError, match="give the graph once"):
        simulate(graph, graph=graph)
    with pytest.raises(TypeError, match=r"takes a Graph or a Scenario, not 'two-towers\.toml'"):
        simulate("two-towers.toml")  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match=r"\[run\] steps: must be from 1"):
        simulate(graph, steps=0, numerics=False)


def test_a_graph_without_values_to_compute_is_one_graph_error_with_numerics() -> None:
    with pytest.raises(GraphError, match=r"^op 'tower_0/loss' \(forward\) needs the parameters"):
        simulate(two_towers(), steps=2)


def test_a_graph_whose_record_would_not_fit_in_memory_is_refused_at_once() -> None:
    from simsync.errors import SimulationError

    graph = Graph()
    names = [f"op_{i}" for i in range(2000)]
    ops(graph, *names)
    graph.connect(*names)
    graph.add_client(Client("main", (names[-1],)))
    with pytest.raises(SimulationError, match=r"2,000 ops run 1,000,000 times would take about"):
        api.simulate(graph, steps=1_000_000, numerics=False)


def test_the_public_sync_points_are_the_summarys_on_every_bundled_scenario() -> None:
    # one name, one meaning: through tensors and through resources (a SyncReplicas take)
    from pathlib import Path

    from simsync.errors import SimulationError
    from simsync.scenario import load_scenario
    from simsync.simulation import summary

    root = Path(__file__).resolve().parent.parent
    found = [*root.glob("examples/*.toml"), *root.glob("lessons/*/*.toml")]
    found += root.glob("assignments/*/scenario.toml")
    checked = takes = 0
    for path in sorted(p for p in found if p.name not in ("lesson.toml", "assignment.toml")):
        scenario = load_scenario(path).with_run(steps=2)
        try:
            result = api.simulate(scenario, numerics=False)
        except SimulationError:  # an impossible set-up, on purpose (a lesson's deadlock)
            continue
        assert api.sync_points(result.graph) == summary(result)["sync_points"], path
        takes += any("take" in point for point in summary(result)["sync_points"])
        checked += 1
    assert checked > 10 and takes > 0  # SyncReplicas scenarios among them
