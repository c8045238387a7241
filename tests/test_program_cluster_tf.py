"""Programs written for a cluster, one process per task, run as their cluster (``--tasks``):
every task in the sandbox, all in one private loopback network. The programs, written for
this project in the manner of the TF1 distributed guide and of
inception_distributed_training.py (tests/fixtures/programs/between_graph.py): 1 parameter
server and 2 workers, the variables placed on the server by replica_device_setter, each
worker's graph its own, MonitoredTrainingSession. The expected facts come from the programs
(two dense layers: four variables; two workers; worker 0 the chief) and from TensorFlow's
protocol, never from simsync's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import one_clear_line

from simsync.crosscheck.user_program import crosscheck_program
from simsync.kinds import sync_points
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import WhatIf, program_summary, simulate_program
from simsync.tf_backend.program import ProgramError

PROGRAMS = Path(__file__).parent / "fixtures" / "programs"
TASKS = {"ps": 1, "worker": 2}
VARIABLES = 4  # hidden/weights, hidden/biases, logits/weights, logits/biases
PS = "/job:ps/task:0"
PROGRAM = PROGRAMS / "between_graph.py"


@pytest.fixture(scope="module")
def asynchronous():
    return import_program(PROGRAM, tasks=TASKS, cache=False)


@pytest.mark.tf
def test_each_workers_graph_is_a_tower_and_the_variables_live_on_the_parameter_server(
    asynchronous,
):
    graph = asynchronous.graph
    assert asynchronous.report["tower_rule"] == "name scope worker_<i>"
    assert sorted(graph.towers) == [0, 1]
    assert {PS, "/job:worker/task:0", "/job:worker/task:1"} <= set(graph.devices)
    trainable = [v for v in graph.variables.values() if v.trainable]
    assert len(trainable) == VARIABLES and {v.device for v in trainable} == {PS}
    # each worker applies its own gradients (no averaging): its applies, on the server
    for worker in (0, 1):
        applies = [o for o in graph.ops() if o.name.startswith(f"worker_{worker}/")
                   and o.name.endswith("ResourceApplyGradientDescent")]  # fmt: skip
        assert len(applies) == VARIABLES and {o.device for o in applies} == {PS}
        assert {o.tower for o in applies} == {worker}
        matmuls = [o for o in graph.ops() if o.tower == worker and o.name.endswith("/MatMul")]
        assert matmuls and {o.device for o in matmuls} == {f"/job:worker/task:{worker}"}
    clients = [c for c in graph.clients if not c.daemon]
    assert sorted(c.name for c in clients) == ["worker_0", "worker_1"]
    assert not sync_points(graph)  # asynchronous: no worker waits for another's gradients


@pytest.mark.tf
def test_simulated_the_workers_update_asynchronously_with_staleness(asynchronous):
    summary = program_summary(simulate_program(PROGRAM, imported=asynchronous, steps=40))
    assert summary["workers"] == 2 and summary["updates_applied"] > 0
    assert set(summary["staleness_by_client"]) == {"worker_0", "worker_1"}
    assert summary["imported"]["fit"]["scale"] > 0
    # each worker's run trains on its own batch, one worker's tower
    batch = summary["batch"]
    assert batch and summary["throughput"] == pytest.approx(batch * summary["updates_per_second"])
    # four workers: the two more are worker 0's copies, each on a task of its own
    run = simulate_program(PROGRAM, WhatIf(towers=4), imported=asynchronous, steps=8)
    assert {f"/job:worker/task:{k}" for k in range(4)} <= set(run.graph.devices)
    assert len([c for c in run.graph.clients if not c.daemon]) == 4


@pytest.mark.tf
def test_sync_replicas_between_graphs_has_its_accumulators_tokens_and_chief():
    sync = ["--sync_replicas"]
    imported = import_program(PROGRAM, args=sync, tasks=TASKS, cache=False)
    graph = imported.graph
    accumulators = [n for n, r in graph.resources.items() if r.kind == "accumulator"]
    assert len(accumulators) == VARIABLES  # one per variable, shared by both workers' graphs
    for name in accumulators:
        pushes = [o for o in graph.ops() if o.resource == name and o.kind == "push_gradients"]
        assert sorted(o.tower for o in pushes) == [0, 1]
        (take,) = [o for o in graph.ops() if o.resource == name and o.kind == "take_gradients"]
        assert take.amount == 2 and take.name.startswith("worker_0/")  # the chief's
    (queue,) = imported.report["token_queues"]
    assert graph.resources[queue].kind == "queue"
    (chief_runner,) = [c for c in graph.clients if c.daemon]  # the chief's queue runner
    assert all(f.startswith("worker_0/") for f in chief_runner.fetches)
    assert sorted(sync_points(graph)) == sorted(
        o.name for o in graph.ops() if o.kind == "take_gradients"
    )
    run = simulate_program(PROGRAM, imported=imported, steps=10, args=sync)
    applies = [u for u in run.simulation.trace.updates if u.applied and "Apply" in u.op]
    assert len(applies) == VARIABLES * 10  # each step applied once, by the chief


@pytest.mark.tf
def test_a_program_that_reads_tf_config_alone_runs_without_the_flags():
    imported = import_program(
        PROGRAM, args=["--tf_config"], tasks=TASKS, task_flags=False, cache=False
    )
    assert sorted(imported.graph.towers) == [0, 1]


@pytest.mark.tf
def test_its_tasks_see_no_network_but_their_own_loopback_and_leave_no_process():
    with pytest.raises(ProgramError) as raised:
        import_program(PROGRAM, args=["--show_interfaces"], tasks=TASKS, cache=False)
    assert "RuntimeError: interfaces: ['lo']" in str(raised.value)
    assert not _running("between_graph.py")


def _running(word: str) -> list[str]:
    """The command lines of this machine's processes that hold ``word``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if word in line and entry.name != str(os.getpid()):
            found.append(line)
    return found


@pytest.mark.tf
@pytest.mark.parametrize(
    ("role", "said"),
    [
        ([], "connects its session to a TensorFlow server"),  # worker 0 by its defaults
        (["--job_name", "ps"], "waits on its TensorFlow server (server.join())"),
    ],
)
def test_one_task_of_a_cluster_without_tasks_is_told_of_them(role, said):
    with pytest.raises(ProgramError) as raised:
        import_program(PROGRAM, args=role, cache=False)
    message = str(raised.value)
    assert "\n" not in message and said in message and "--tasks ps=1,worker=2" in message


@pytest.mark.tf
def test_a_cluster_in_one_process_has_a_tower_and_a_client_per_workers_thread():
    """tests/fixtures/programs/cluster_threads.py starts every server of its cluster
    (localhost, which has a name in the sandbox) and runs each worker as a thread with a
    graph and a session of its own."""
    program = PROGRAMS / "cluster_threads.py"
    imported = import_program(program, cache=False, processes=1)
    graph = imported.graph
    assert sorted(graph.towers) == [0, 1]
    assert sorted(c.name for c in graph.clients) == ["worker_0", "worker_1"]
    trainable = [v for v in graph.variables.values() if v.trainable]
    assert len(trainable) == VARIABLES and {v.device for v in trainable} == {PS}
    assert not sync_points(graph)
    _, report = crosscheck_program(program, runs=1, traced=3, untraced=10)
    assert report["structure"]["ok"] and report["structure"]["checked"] > 0
    assert sorted(c["client"] for c in report["step_time"]) == ["worker_0", "worker_1"]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("ps", "give each job and its number of tasks"),
        ("ps=1,ps=2,worker=1", "job 'ps' is given twice"),
        ("ps=1", "no job trains"),
        ("ps=0,worker=2", "every job has at least 1 task"),
        ("worker=17", "at most 16"),
        ("Worker=1", "give each job"),
        ("worker=\u0662", "give each job"),  # an Arabic-Indic 2: int() would take it
        ("worker=\u00b2", "give each job"),  # a superscript 2: isdigit() would take it
    ],
)
def test_tasks_that_are_no_cluster_are_refused_in_one_line(given, said):
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", "train.py", "--tasks", given],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]  # after argparse's usage: one line
    assert last.startswith("simsync simulate: error: argument --tasks: ") and said in last


@pytest.mark.tf
def test_crosscheck_runs_the_cluster_again_and_compares_each_worker():
    _, report = crosscheck_program(PROGRAM, runs=1, traced=3, untraced=10, tasks=TASKS)
    assert report["same_graph"] and report["structure"]["ok"]
    assert report["structure"]["checked"] > 0
    assert sorted(c["client"] for c in report["step_time"]) == ["worker_0", "worker_1"]


def test_a_scenario_takes_no_tasks():
    root = Path(__file__).parent.parent
    graph = subprocess.run(
        [sys.executable, "-m", "simsync", "graph", "examples/four_towers.toml", "--tasks",
         "ps=1,worker=2"],
        capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip
    one_clear_line(graph, "--tasks", "is a scenario")
