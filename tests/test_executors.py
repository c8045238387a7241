"""The executors behind one protocol (:class:`simsync.trace.Executor`): a graph, a number of
steps and a seed in, the trace of running it out. SimPy's two (the fast engine and the
reference a learner can read) give the same trace; TensorFlow's session runs the same graph
to a trace of the same ops, step by step; what builds, replays and summarises sits above them
(``simsync.simulation``), and neither executor imports the other (the import contracts)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simsync.engine import run_graph
from simsync.engine.reference import run_reference
from simsync.ir import Graph
from simsync.patterns import build
from simsync.scenario import load_scenario
from simsync.simulation import simulate
from simsync.trace import Executor, Trace

ROOT = Path(__file__).resolve().parent.parent
FOUR_TOWERS = ROOT / "examples" / "four_towers.toml"
STRAGGLERS = ROOT / "examples" / "random_stragglers.toml"


def _graph() -> Graph:
    graph = build(load_scenario(STRAGGLERS))  # compute times drawn at random
    graph.host_cores.clear()  # the reference executor gives each device a core of its own
    return graph


def _run(executor: Executor, graph: Graph, steps: int, seed: int) -> Trace:
    return executor(graph, steps, seed)


def test_both_simpy_executors_keep_the_protocol_and_agree() -> None:
    graph = _graph()
    fast = _run(run_graph, graph, 4, 7)
    reference = _run(run_reference, graph, 4, 7)
    assert len(fast.steps) == 4
    assert fast.steps == reference.steps
    assert fast.ops == reference.ops
    # another seed draws other compute times: the protocol's seed is the draws'
    assert _run(run_graph, graph, 4, 8).steps != fast.steps


def test_the_simulation_runs_the_engine_on_the_graph_it_is_given() -> None:
    scenario = load_scenario(FOUR_TOWERS).with_run(steps=3, seed=5)
    graph = build(scenario)
    simulated = simulate(scenario, numerics=False, graph=graph)
    assert simulated.graph is graph
    assert simulated.trace.steps == run_graph(graph, 3, 5).steps


@pytest.mark.tf
def test_tensorflow_executor_runs_the_same_ops_as_the_engine() -> None:
    from simsync.tf_backend.session.execute import tensorflow_executor

    scenario = load_scenario(FOUR_TOWERS)
    scenario = dataclasses.replace(
        scenario, cluster=dataclasses.replace(scenario.cluster, devices=2, speeds=(1.0, 1.0))
    )
    graph = build(scenario)
    real = _run(tensorflow_executor(scenario, warmup=1), graph, 2, 3)
    simulated = _run(run_graph, graph, 2, 3)
    assert real.source != simulated.source
    assert len(real.steps) == len(simulated.steps) == 2
    real_steps = sorted({op.step for op in real.ops})  # numbered after the warm-up's
    simulated_steps = sorted({op.step for op in simulated.ops})
    assert len(real_steps) == len(simulated_steps) == 2
    for ours, theirs in zip(simulated_steps, real_steps, strict=True):
        ran = {op.op for op in real.ops if op.step == theirs}
        assert ran == {op.op for op in simulated.ops if op.step == ours}
        assert len(ran) == 2 * 4 + 2  # each tower's 4 ops, the average and the apply
