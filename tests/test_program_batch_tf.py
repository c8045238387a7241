"""``--batch N``: a program's batch, found from what its inputs bring in, and the what-if that
changes it. The programs: tests/fixtures/programs/softmax_feed.py (feeds a batch of 100, or of
its first argument, to placeholders of shape [None, ...]) and lesson 7's program (a batch of
32 drawn at random in each of two towers, whose hidden layer is also 32 wide: a weight's
gradient there has the shape of an activation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import one_clear_line

from simsync.errors import UsageError
from simsync.ir import Cost, Graph, Op
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import WhatIf, simulate_program
from simsync.tf_backend.program.whatif import with_batch
from simsync.tutor.content import lessons_root

PROGRAMS = Path(__file__).parent / "fixtures" / "programs"
SOFTMAX = PROGRAMS / "softmax_feed.py"
LESSON_7 = lessons_root() / "07-batch-norm-across-towers" / "update_ops_program.py"


@pytest.fixture(scope="module")
def softmax():
    return import_program(SOFTMAX, processes=1)


@pytest.mark.tf
def test_a_feed_dict_programs_batch_is_what_it_fed_and_each_batch_has_its_own_costs(softmax):
    larger = import_program(SOFTMAX, args=["300"], processes=1)
    assert softmax.report["batch"] == 100 and larger.report["batch"] == 300
    # the graph is one (its placeholders are [None, 784]); what it fed is not: two profiles
    assert softmax.key != larger.key
    assert larger.graph.tensor("MatMul", "add").shape == (300, 10)


@pytest.mark.tf
def test_the_work_that_grows_with_the_batch_is_scaled_and_the_rest_kept(softmax):
    graph = softmax.graph
    bigger, line = with_batch(graph, 300)
    assert line.startswith("batch 300 (the program ran 100):")
    # x @ W and both matmuls of its gradient take the batch; reading W and applying its
    # gradient (784 x 10 whatever the batch) do not
    for name in ("MatMul", "gradients/MatMul_grad/MatMul", "gradients/MatMul_grad/MatMul_1"):
        before, after = graph.op(name).cost.mean, bigger.op(name).cost.mean
        assert before < after <= 3 * before, name
    for op in graph.ops():
        if "ResourceApplyGradientDescent" in op.name or op.name.endswith("ReadVariableOp"):
            assert bigger.op(op.name).cost == op.cost, op.name
    logits = bigger.tensor("MatMul", "add")
    assert logits.shape == (300, 10) and logits.nbytes == 300 * 10 * 4
    apply = "GradientDescent/update_Variable/ResourceApplyGradientDescent"
    gradient = [t for t in bigger.inputs(apply) if not t.control]
    assert [t.shape for t in gradient] == [(784, 10)]
    assert bigger.facts.batch.size == 300 and graph.facts.batch.size == 100


@pytest.mark.tf
def test_a_weights_gradient_shaped_like_an_activation_does_not_grow():
    imported = import_program(LESSON_7, processes=1)
    graph = imported.graph
    assert imported.report["batch"] == 32  # tf.random.normal([BATCH, FEATURES]) per tower
    grows = set(graph.facts.batch.ops)
    # the averaging of the gradients and the applies: a weight's size, whatever the batch
    shared = [op.name for op in graph.ops() if op.tower is None]
    assert shared and not grows & set(shared)
    for tower in (0, 1):
        matmuls = [
            op.name for op in graph.ops() if op.tower == tower and op.name.endswith("MatMul")
        ]
        assert matmuls and set(matmuls) <= grows
    # logits/kernel is 32 x 4, as the logits of a batch of 32 are: its gradient keeps its bytes
    bigger, _ = with_batch(graph, 64)
    apply = "GradientDescent/update_foo/logits/kernel/ResourceApplyGradientDescent"
    (before,) = [t for t in graph.inputs(apply) if not t.control]
    (after,) = [t for t in bigger.inputs(apply) if not t.control]
    assert before.shape == after.shape == (32, 4) and after.nbytes == before.nbytes


@pytest.mark.tf
def test_a_batch_what_if_has_no_values_of_the_programs_own(softmax):
    run = simulate_program(SOFTMAX, WhatIf(batch=300), imported=softmax, steps=3, values=True)
    assert run.values is None
    assert "batch is 300" in run.no_values and "batches of 100" in run.no_values


def test_a_graph_without_an_input_of_examples_says_so_in_one_line():
    graph = Graph()
    graph.add_op(Op("a", "generic", "/cpu:0", Cost(1e-3)))
    with pytest.raises(UsageError, match="brings examples in") as raised:
        with_batch(graph, 64)
    assert str(raised.value).startswith("--batch 64:") and "\n" not in str(raised.value)


@pytest.mark.parametrize("given", ["0", "-3", "1.5", "many", str(2**21), " 4", "\u0664", "4e2"])
def test_a_batch_that_is_no_count_of_examples_is_refused_by_the_command_line(given):
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(SOFTMAX), "--batch", given],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"--batch: {given!r}: must be a whole number of examples" in done.stderr


def test_a_scenario_takes_no_batch():
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", "examples/four_towers.toml", "--batch", "8"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    one_clear_line(done, "--batch", "four_towers.toml is a scenario", "[model] batch_size")
