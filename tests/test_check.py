"""Kinds declare their inputs by role, and the kind-aware check holds every graph to them: every
problem with a graph is one ``GraphError`` line that names the op and what would put it right,
never a ``KeyError`` from inside a rule."""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from simsync.api import (
    Client,
    ClusterConfig,
    Cost,
    Device,
    Graph,
    Op,
    Resource,
    Scenario,
    Tensor,
    TrainingConfig,
    build,
    simulate,
    summary,
    validate,
)
from simsync.errors import GraphError
from simsync.grading.assignment import load_assignments
from simsync.ir import graph_from_dict, graph_to_dict
from simsync.kinds import KINDS, check_graph, providers
from simsync.scenario import load_scenario, scenario_from_dict
from simsync.viz import SummaryView

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = Scenario("check", cluster=ClusterConfig(devices=2)).with_run(steps=2)


# -- the graphs users build: the docs' and the assignments' solutions -------------------------
def doc_graphs() -> dict[str, Graph]:
    """Every graph the examples of docs/api.md build, by the name they give it."""
    namespace: dict[str, Any] = {}
    for example in doctest.DocTestParser().get_examples((ROOT / "docs/api.md").read_text()):
        with contextlib.suppress(Exception):  # the examples that show an error
            exec(compile(example.source, "api.md", "single"), namespace)
    return {name: value for name, value in namespace.items() if isinstance(value, Graph)}


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"solution_{path.parent.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solution_graphs() -> Iterator[tuple[str, Graph, Scenario]]:
    """Every graph each assignment grades, built by its reference solution."""
    for assignment in load_assignments():
        scenario = load_scenario(assignment.scenario)
        for spec in sorted({check.graph for check in assignment.checks}):
            file, _, function = spec.partition(":")
            path = assignment.folder / "solution" / file
            if function:
                graph = getattr(_module(path), function)(scenario)
                yield f"{assignment.slug}:{spec}", graph, scenario
            else:  # a [training] table over the assignment's scenario
                data = tomllib.loads(assignment.scenario.read_text())
                data["training"] = tomllib.loads(path.read_text())["training"]
                trained = scenario_from_dict(data)
                yield f"{assignment.slug}:{spec}", build(trained), trained


SOLUTIONS = {label: (graph, scenario) for label, graph, scenario in solution_graphs()}
DOCS = doc_graphs()


def without(graph: Graph, index: int) -> Graph:
    """``graph`` less its ``index``-th tensor."""
    data = graph_to_dict(graph)
    del data["tensors"][index]
    return graph_from_dict(data)


def assert_one_graph_error_per_lost_tensor(graph: Graph, scenario: Scenario) -> None:
    """Removing any one tensor of ``graph`` makes simulating it (with numerics, if the whole
    graph computes values) one GraphError line, whatever the tensor."""
    try:
        check_graph(graph, scenario.model)
        numerics = True
    except GraphError:
        check_graph(graph, values=False)  # a graph for timing only
        numerics = False
    tensors = graph_to_dict(graph)["tensors"]
    assert tensors
    for index, tensor in enumerate(tensors):
        lost = f"{tensor['src']} -> {tensor['dst']}"
        with pytest.raises(GraphError) as raised:
            simulate(scenario.with_run(steps=2), graph=without(graph, index), numerics=numerics)
        message = str(raised.value)
        assert message and "\n" not in message, lost
        assert re.match(r"^(op|variable|client) '", message), (lost, message)


@pytest.mark.parametrize("name", sorted(DOCS))
def test_a_docs_graph_without_any_one_of_its_tensors_is_one_graph_error(name: str) -> None:
    scenario = Scenario("four", cluster=ClusterConfig(devices=4))
    if name == "typo":  # the example of an unknown kind
        with pytest.raises(GraphError, match="did you mean 'forward'"):
            validate(DOCS[name], values=False)
        return
    assert_one_graph_error_per_lost_tensor(DOCS[name], scenario)


@pytest.mark.parametrize("label", sorted(SOLUTIONS))
def test_a_solutions_graph_without_any_one_of_its_tensors_is_one_graph_error(label: str) -> None:
    graph, scenario = SOLUTIONS[label]
    check_graph(graph, scenario.model)  # the solution itself computes values
    assert_one_graph_error_per_lost_tensor(graph, scenario)


# -- the crashes users reported --------------------------------------------------------------
def test_the_docs_two_towers_example_says_what_values_need_instead_of_a_key_error() -> None:
    two = DOCS["g"]
    validate(two, values=False)
    with pytest.raises(GraphError, match=r"^op 'tower_0/loss' \(forward\) needs the parameters"):
        simulate(SCENARIO, graph=two)
    trace = simulate(SCENARIO, graph=two, numerics=False).trace  # timing needs no values
    assert len(trace.steps) == 2 and trace.values_skipped is None


def test_the_tower_loop_without_its_batch_names_the_batch() -> None:
    graph, scenario = SOLUTIONS["01-the-tower-loop:towers.py:build"]
    data = graph_to_dict(graph)
    data["tensors"] = [
        t for t in data["tensors"] if (t["src"], t["dst"]) != ("tower_0/dequeue", "tower_0/loss")
    ]
    broken = graph_from_dict(data)
    expected = (
        "op 'tower_0/loss' (forward) needs the batch: add a tensor from an op that provides it "
        "(kind 'dequeue')"
    )
    for run in (lambda: validate(broken), lambda: simulate(scenario, graph=broken)):
        with pytest.raises(GraphError) as raised:
            run()
        assert str(raised.value) == expected


def test_an_unknown_kind_is_refused_with_a_guess_everywhere() -> None:
    graph = Graph()
    graph.add_device(Device("/gpu:0"))
    graph.add_op(Op("tower_0/loss", "foward", "/gpu:0"))
    graph.add_client(Client("main", ("tower_0/loss",)))
    expected = r"^op 'tower_0/loss' has unknown kind 'foward'; did you mean 'forward'\? known"
    for run in (
        lambda: validate(graph, values=False),
        lambda: simulate(SCENARIO, graph=graph, numerics=False),
        lambda: graph_from_dict(graph_to_dict(graph), check=check_graph),
    ):
        with pytest.raises(GraphError, match=expected):
            run()


# -- what the kinds declare ------------------------------------------------------------------
def test_every_role_a_kind_needs_is_provided_by_some_kind() -> None:
    for kind in KINDS.values():
        assert kind.provides or not kind.computes, kind.name
        for need in kind.needs:
            for role in need.roles:
                assert providers(role), f"{kind.name} needs {role}, which no kind provides"


def test_rules_find_their_inputs_by_role_never_by_the_producers_kind() -> None:
    pattern = re.compile(r"by_kind|src\.kind|source\.kind\s*==|\[\"(read|dequeue|forward)\"\]")
    offenders = []
    for path in sorted((ROOT / "simsync/kinds").glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []


def _one_tower(extra: list[Tensor] | None = None, **kinds: str) -> Graph:
    """One tower on /gpu:0 (read, dequeue, loss, gradients), its ops' kinds as given."""
    graph = Graph()
    graph.add_device(Device("/gpu:0"))
    for name, default in (("read", "read"), ("dequeue", "dequeue"), ("loss", "forward"),
                          ("gradients", "backward")):  # fmt: skip
        graph.add_op(Op(name, kinds.get(name, default), "/gpu:0", Cost(0.001)))
    for src, dst in (("read", "loss"), ("dequeue", "loss"), ("loss", "gradients")):
        graph.add_tensor(Tensor(src, dst))
    for tensor in extra or []:
        graph.add_tensor(tensor)
    graph.add_client(Client("main", ("gradients",)))
    return graph


def test_an_input_of_a_role_the_kind_does_not_take_is_named() -> None:
    graph = _one_tower([Tensor("dequeue", "gradients")])
    with pytest.raises(GraphError) as raised:
        validate(graph)
    assert str(raised.value) == (
        "op 'gradients' (backward) takes no batch, but 'dequeue' (dequeue) gives it the batch: "
        "remove that tensor, or make it a control edge (Tensor(..., control=True)) if "
        "'gradients' only waits for it"
    )
    validate(_one_tower([Tensor("dequeue", "gradients", control=True)]))  # ordering only
    validate(graph, values=False)  # timing needs no values


def test_more_inputs_of_a_role_than_the_kind_takes_are_named() -> None:
    graph = _one_tower()
    graph.add_op(Op("read_again", "read", "/gpu:0"))
    graph.add_tensor(Tensor("read_again", "loss"))
    with pytest.raises(GraphError) as raised:
        validate(graph)
    assert str(raised.value) == (
        "op 'loss' (forward) takes the parameters from one op, but 2 give them ('read', "
        "'read_again'): keep one, or make the others control edges (Tensor(..., control=True))"
    )


def test_an_op_that_acts_on_a_resource_needs_one_of_its_type() -> None:
    graph = Graph()
    graph.add_device(Device("/cpu:0"))
    graph.add_resource(Resource("q", "queue", "/cpu:0"))
    graph.add_op(Op("take", "take_gradients", "/cpu:0", amount=1, resource="q"))
    graph.add_client(Client("main", ("take",)))
    with pytest.raises(GraphError, match=r"acts on an accumulator, but 'q' is a queue"):
        simulate(SCENARIO, graph=graph, numerics=False)


def test_an_op_no_client_runs_is_named_where_the_chain_ends() -> None:
    graph = _one_tower()
    graph.add_op(Op("summary", "generic", "/gpu:0"))
    graph.add_tensor(Tensor("loss", "summary"))
    with pytest.raises(GraphError, match=r"^op 'summary' \(generic\) is run by no client"):
        simulate(SCENARIO, graph=graph, numerics=False)


def test_with_the_model_the_values_must_be_computable() -> None:
    graph = _one_tower()  # its read reads no variable: the loss would have no parameters
    validate(graph)  # every input is there
    with pytest.raises(GraphError, match=r"^op 'loss' \(forward\) computes with every parameter"):
        validate(graph, SCENARIO.model)


# -- generic: timing only --------------------------------------------------------------------
def test_a_generic_op_runs_for_its_cost_and_values_are_not_computed_through_it() -> None:
    graph = _one_tower(read="generic")  # an op simsync need not understand, say
    sim = simulate(SCENARIO, graph=graph)
    facts = summary(sim)
    assert [round(s.duration, 6) for s in sim.trace.steps] == [0.004, 0.004]  # its cost too
    assert facts["loss"] == [None, None] and sim.trace.params == {}
    assert facts["values_skipped"] == (
        "values are not computed: op 'loss' (forward) takes a tensor from 'read' (generic), "
        "which computes no value"
    )
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(SummaryView(facts))
    assert "values are not computed: op 'loss' (forward)" in out.getvalue()
    numbers = simulate(SCENARIO, graph=DOCS["mine"])  # no generic op: values as ever
    assert "values_skipped" not in summary(numbers)


def test_a_generic_op_that_only_waits_changes_no_value() -> None:
    mine = DOCS["mine"]
    data = graph_to_dict(mine)
    data["ops"].append({"name": "summary", "kind": "generic", "device": "/cpu:0"})
    data["tensors"] += [
        {"src": "tower_0/loss", "dst": "summary"},
        {"src": "summary", "dst": "my_apply", "control": True},
    ]
    waited = graph_from_dict(data, check=check_graph)
    scenario = Scenario("four", cluster=ClusterConfig(devices=4)).with_run(steps=3)
    one, two = simulate(scenario, graph=mine).trace, simulate(scenario, graph=waited).trace
    assert [s.loss for s in one.steps] == [s.loss for s in two.steps]
    assert two.values_skipped is None


def test_a_run_whose_read_waits_for_a_write_of_its_own_run_replays() -> None:
    async_scenario = Scenario(
        "async", cluster=ClusterConfig(devices=2), training=TrainingConfig(mode="async")
    ).with_run(steps=4)
    data = graph_to_dict(build(async_scenario))
    data["tensors"].append(  # worker_1's runs read once worker_0's update landed
        {"src": "worker_0/apply_gradients", "dst": "worker_1/read_variables", "control": True}
    )
    trace = simulate(async_scenario, graph=graph_from_dict(data)).trace
    assert trace.steps and all(step.loss is not None for step in trace.steps)
