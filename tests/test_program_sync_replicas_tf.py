"""A real program with its own SyncReplicasOptimizer, imported and run on TensorFlow:
tests/fixtures/programs/sync_replicas_threads.py, 3 worker threads in one process
(--num_workers 3 --replicas 3 by default), each with its own optimizer, four trainable
variables on /cpu:0, worker 0 the chief. The expected facts come from the program and from
SyncReplicasOptimizer's protocol (tokens per step max(N, R); one apply per step), never from
simsync's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from simsync.crosscheck.user_program import crosscheck_program
from simsync.kinds import sync_points
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import program_summary, simulate_program
from simsync.tf_backend.program import ProgramError

pytestmark = pytest.mark.tf
PROGRAM = Path(__file__).parent / "fixtures" / "programs" / "sync_replicas_threads.py"
WORKERS, REPLICAS, VARIABLES = 3, 3, 4


@pytest.fixture(scope="module")
def imported():
    return import_program(PROGRAM)


def test_its_accumulators_token_queue_and_chief_are_read_from_the_graph(imported):
    graph = imported.graph
    accumulators = [n for n, r in graph.resources.items() if r.kind == "accumulator"]
    assert len(accumulators) == VARIABLES  # one per variable, shared by every worker's
    for name in accumulators:
        pushes = [op for op in graph.ops() if op.resource == name and op.kind == "push_gradients"]
        assert sorted(op.tower for op in pushes) == list(range(WORKERS))
        (take,) = [op for op in graph.ops() if op.resource == name and op.kind == "take_gradients"]
        assert take.amount == REPLICAS
        # made by the chief's optimizer, in the program's train(): opt.minimize(...)
        assert imported.report["made_in"][take.name].startswith("train (sync_replicas_threads.py:")
    (queue,) = imported.report["token_queues"]
    (enqueue,) = [op for op in graph.ops() if op.kind == "enqueue_tokens"]
    assert enqueue.resource == queue and enqueue.amount == max(WORKERS, REPLICAS)
    assert enqueue.reads == (graph.facts.global_step,)  # its tokens carry the global step
    assert len([op for op in graph.ops() if op.kind == "dequeue_token"]) == WORKERS
    workers = [c for c in graph.clients if not c.daemon]
    assert len(workers) == WORKERS and {c.until for c in workers} == {graph.facts.global_step}
    (chief,) = [c for c in graph.clients if c.daemon]
    assert chief.fetches == (enqueue.name,)
    # only the chief's runs apply the gradients: their costs come from its traced runs
    applies = [op for op in graph.ops() if op.name.endswith("ResourceApplyGradientDescent")]
    assert len(applies) == VARIABLES and all(op.cost.mean > 0 for op in applies)
    assert sorted(sync_points(graph)) == sorted(
        op.name for op in graph.ops() if op.kind == "take_gradients"
    )


def test_simulated_it_applies_once_per_step_and_has_no_values_yet(imported):
    steps = 12
    run = simulate_program(PROGRAM, imported=imported, steps=steps, values=True)
    summary = program_summary(run)
    trace = run.simulation.trace
    takes = [e for e in trace.resources if e.action == "take"]
    applies = [u for u in trace.updates if u.applied and "ApplyGradientDescent" in u.op]
    # the workers run until the global step is 12: every accumulator is taken once per
    # step, and every variable updated once per step, by the chief alone
    assert len(takes) == len(applies) == VARIABLES * steps
    assert {u.client for u in applies} == {c.name for c in run.graph.clients if c.daemon}
    assert summary["imported"]["accumulators"] and summary["imported"]["token_queues"]
    assert summary["gradients"]["pushed"] >= WORKERS * steps
    assert not summary["values"]["computed"]
    assert "accumulator" in summary["values"]["why"]


def test_crosscheck_runs_the_workers_together(imported):
    _, report = crosscheck_program(PROGRAM, runs=1, traced=3, untraced=10)
    assert report["same_graph"] and report["structure"]["ok"]
    assert report["structure"]["checked"] > 0
    # the workers cannot run alone (each waits for the others' gradients): measured together,
    # each one's step is compared with the prediction
    steps = report["step_time"]
    assert len(steps) == WORKERS
    assert all(step["measured"] > 0 and step["predicted"] > 0 for step in steps)


def test_workers_whose_token_queues_differ_are_one_clear_line():
    # --unplaced_step: the global step on no device, so each worker's token queue on its
    # own; the workers but the chief wait for tokens nobody puts (TensorFlow hangs)
    found = r"only 1 of the 3 workers .* reached their training loop"
    with pytest.raises(ProgramError, match=found):
        import_program(PROGRAM, args=["--unplaced_step"])
