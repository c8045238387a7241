"""Importing real TensorFlow programs (held-out test programs in tests/fixtures/programs, in
the style of cifar10_multi_gpu_train.py): the expected facts come from each program's own
structure (its NUM_GPUS, its variables, its threads), never from simsync's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import one_clear_line

from simsync.crosscheck.user_program import crosscheck_program
from simsync.errors import UsageError
from simsync.kinds import sync_points
from simsync.sandbox.bubblewrap import Limits
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import WhatIf, program_summary, simulate_program
from simsync.tf_backend.program import ProgramError
from simsync.tf_backend.program.convert import convert
from simsync.tf_backend.program.step_costs import QUEUE_STEPS

pytestmark = pytest.mark.tf
PROGRAMS = Path(__file__).parent / "fixtures" / "programs"


@pytest.fixture(scope="module")
def cpu_variables():
    # NUM_GPUS = 3; four trainable variables (two layers' weights and biases) on /cpu:0
    return import_program(PROGRAMS / "towers_cpu_variables.py")


@pytest.fixture(scope="module")
def gpu_variables():
    # NUM_GPUS = 2; two variables made inside tower 0's tf.device('/gpu:0')
    return import_program(PROGRAMS / "towers_gpu_variables.py")


def test_towers_and_sync_points_of_the_tutorials_loop(cpu_variables):
    graph = cpu_variables.graph
    assert sorted(graph.towers) == [0, 1, 2]
    assert {v for v, var in graph.variables.items() if var.trainable} == {
        "hidden/weights", "hidden/biases", "softmax_linear/weights", "softmax_linear/biases"
    }  # fmt: skip
    assert all(var.device == "/cpu:0" for var in graph.variables.values())
    # average_gradients concatenates every tower's gradient of each variable: one meeting each
    points = sync_points(graph)
    assert len(points) == 4
    for point in points:
        assert cpu_variables.report["made_in"][point].startswith("average_gradients (")
        assert {graph.op(t.src).tower for t in graph.inputs(point)} <= {None}  # ExpandDims
    # the towers' own ops are on their own devices
    assert {op.device for op in graph.ops() if op.tower == 2 and op.name.endswith("MatMul")} == {
        "/gpu:2"
    }
    assert cpu_variables.report["queue_runners"][0]["threads"] == 2
    assert [c.name for c in graph.clients if not c.daemon] == ["main"]


def test_the_input_queue_and_its_runners_threads(cpu_variables, gpu_variables):
    """FIFOQueue(2 * NUM_GPUS) filled by QueueRunner(queue, [enqueue] * 2): by default taken
    to be never short (its runners' threads are not simulated); with them simulated, a queue
    of 6 with its two threads, each tower's dequeue taking one batch from it, and the
    elements they make timed by the profile."""
    graph = cpu_variables.graph
    assert not graph.resources and not [c for c in graph.clients if c.daemon]
    assert cpu_variables.report["input_queues"] == {"fifo_queue": {"takes": 3, "simulated": False}}
    graph, _ = convert(cpu_variables.data, cpu_variables.profile, queue_runners=True)
    queue = graph.resources["fifo_queue"]
    assert (queue.kind, queue.capacity, queue.item) == ("queue", 6, "element")
    assert 0 <= queue.initial <= 6
    dequeues = [op for op in graph.ops() if op.kind == "dequeue_elements"]
    assert sorted(op.tower for op in dequeues) == [0, 1, 2]
    assert {(op.resource, op.amount) for op in dequeues} == {("fifo_queue", 1)}
    runners = [c for c in graph.clients if c.daemon]
    assert [c.fetches for c in runners] == [("fifo_queue_enqueue",)] * 2
    made = [op for op in graph.ops() if op.name.startswith("random_normal/")]
    assert made and all(op.cost.mean > 0 for op in made if op.name.endswith("Normal"))
    # filled 20 times with 200 batches before the loop, nothing fills it while it trains:
    # the loop's first run took two
    queue = gpu_variables.graph.resources["fifo_queue"]
    assert (queue.capacity, queue.initial) == (10000, 3998)
    assert "nothing fills 'fifo_queue' while the program trains" in queue.note
    assert not [c for c in gpu_variables.graph.clients if c.daemon]


def test_variables_made_in_a_towers_device_land_there(gpu_variables):
    graph = gpu_variables.graph
    assert sorted(graph.towers) == [0, 1]
    trainable = {v: var.device for v, var in graph.variables.items() if var.trainable}
    assert trainable == {"model/weights": "/gpu:0", "model/biases": "/gpu:0"}
    assert len(sync_points(graph)) == 2
    # tower 1 reads the variables from tower 0's device: a transfer across devices
    reads = [op for op in graph.ops() if op.tower == 1 and "model/weights" in op.reads]
    assert reads


def test_what_if_more_towers_replicates_tower_0(cpu_variables):
    run = simulate_program("towers_cpu_variables.py", WhatIf(towers=6), imported=cpu_variables,
                           steps=20)  # fmt: skip
    summary = program_summary(run)
    assert summary["towers"] == 6
    assert len(summary["sync_points"]) == 4
    for point in summary["sync_points"]:
        assert len(run.graph.inputs(point)) == 6
    assert "replicated from tower_0" in summary["what_if"][0]
    # each tower dequeues its own batch of 32: a step trains on 6 of them
    assert summary["batch"] == 32
    assert summary["throughput"] == pytest.approx(6 * 32 * summary["updates_per_second"])
    assert {
        op.device for op in run.graph.ops() if op.tower == 5 and op.name.endswith("MatMul")
    } == {"/gpu:5"}


def test_json_of_an_imported_program(tmp_path):
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(PROGRAMS / "towers_gpu_variables.py"),
         "--json", "--steps", "20", "--towers", "4"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert summary["towers"] == 4 and summary["source"].endswith("towers_gpu_variables.py")
    assert len(summary["sync_points"]) == 2 and summary["ops"] > 0
    assert summary["step_time"]["mean"] > 0
    assert summary["imported"]["ignored"]["not run by the training loop"] > 0


def test_queue_runners_of_another_graph_are_not_the_loops():
    # an evaluation graph's queue runner, started first, runs in the same process
    imported = import_program(PROGRAMS / "eval_graph_first.py")
    (runner,) = imported.report["queue_runners"]
    assert runner["threads"] == 2 and runner["queue"] == "fifo_queue"


def test_threads_calling_sess_run_are_clients():
    imported = import_program(PROGRAMS / "async_threads.py")  # NUM_THREADS = 3
    clients = imported.graph.clients
    assert len(clients) == 3
    assert {c.fetches for c in clients} == {clients[0].fetches}


@pytest.mark.parametrize(
    ("program", "words"),
    [
        ("bad_syntax.py", ["bad_syntax.py:3", "SyntaxError"]),
        ("bad_raises.py", ["bad_raises.py:3", "ValueError", "no data folder given"]),
        ("bad_no_session.py", ["without calling Session.run", "tf.compat.v1"]),
        ("bad_eager.py", ["ran eagerly", "not supported"]),
        # TensorFlow's own words first: the op, and what went wrong in it
        (
            "bad_op.py",
            [
                "bad_op.py:10",
                "InvalidArgumentError at 'assert_positive/",
                "the count must be positive",
            ],
        ),
    ],
)
def test_bad_programs_get_one_clear_line(program, words):
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(PROGRAMS / program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    one_clear_line(ran, program, *words)


def test_a_loop_before_the_first_run_hits_the_time_limit():
    with pytest.raises(ProgramError, match="took longer than 30 s"):
        import_program(PROGRAMS / "bad_loops.py", limits=Limits(wall_seconds=30.0))


def test_crosscheck_runs_the_program_again_and_checks_its_graph(cpu_variables):
    # NUM_GPUS = 3, four trainable variables: one concat of every tower's gradient each
    _, report = crosscheck_program(
        PROGRAMS / "towers_cpu_variables.py", runs=1, traced=4, untraced=4
    )
    assert report["same_graph"] and report["runs"] == 1 and report["traced_steps"] == 4
    assert report["structure"]["ok"] and report["structure"]["checked"] > 0
    assert len(report["arrivals"]) == 4
    for found in report["arrivals"]:
        assert set(found["measured_last"]) == {"tower_0", "tower_1", "tower_2"}
        assert found["steps"] == 4
    (step,) = report["step_time"]  # one thread loops
    assert step["client"] == "main" and len(step["run_medians"]) == 1
    assert step["predicted"] > 0 and step["measured"] > 0
    # its input queue: 3 batches a step from a queue of 6 its two runner threads fill, which
    # keep up in the runs (measured: short at 5 of 300 step starts on a quiet machine, 37
    # under load), as the simulation takes them to
    (queue,) = report["input_queues"]
    assert (queue["queue"], queue["takes"], queue["simulated_as_queue"]) == ("fifo_queue", 3, False)
    assert queue["steps"]["measured"] == QUEUE_STEPS
    assert queue["keeps_up"] == {"simulated": True, "measured": True} and queue["agree"]


def test_crosscheck_of_more_towers_runs_the_program_built_with_them():
    # towers_argv.py builds sys.argv[1] towers (2 without): the prediction replicates
    # tower_0 of the 2-tower program, the runs build 4 towers
    run, report = crosscheck_program(
        PROGRAMS / "towers_argv.py", WhatIf(towers=4), runs=1, traced=3, untraced=3,
        real_args=["4"],
    )  # fmt: skip
    assert len(run.imported.graph.towers) == 2 and len(run.graph.towers) == 4
    assert report["real_args"] == ["4"] and report["args"] == []
    assert report["structure"]["ok"]
    assert len(report["arrivals"]) == 4
    for found in report["arrivals"]:
        assert set(found["measured_last"]) == {f"tower_{i}" for i in range(4)}
    assert report["step_time"][0]["measured"] > 0


def test_a_what_if_crosschecked_against_a_program_built_otherwise_is_refused():
    # asked 4 towers, the program told to build 3: one line, after the first run
    with pytest.raises(UsageError, match=r"prediction has 4 towers, but the program run with 3 "
                       r"built 3: after --, give it what makes it build 4"):  # fmt: skip
        crosscheck_program(
            PROGRAMS / "towers_argv.py", WhatIf(towers=4), runs=2, traced=3, untraced=3,
            real_args=["3"],
        )  # fmt: skip


def test_the_graph_of_a_program_is_drawn_one_box_per_name_scope(cpu_variables):
    """towers_cpu_variables.py: 3 towers, each with its layers (hidden, softmax_linear) and
    its gradients in its scope; the averaging's concat of each of the 4 variables is one
    box, and the sync point. --every-op draws every TensorFlow op instead."""
    from simsync.viz import folded_by_scope

    folded = folded_by_scope(cpu_variables.graph)
    names = {op.name for op in folded.ops()}
    assert {f"tower_{i}/gradients" for i in range(3)} <= {n.split(" (")[0] for n in names}
    assert "concat (4 ops)" in names and sync_points(folded) == ["concat (4 ops)"]
    assert sorted(folded.towers) == [0, 1, 2]
    assert sum(op.cost.expected for op in folded.ops()) == pytest.approx(
        sum(op.cost.expected for op in cpu_variables.graph.ops())
    )
    program = str(PROGRAMS / "towers_cpu_variables.py")
    shown = subprocess.run(
        [sys.executable, "-m", "simsync", "graph", program], capture_output=True, text=True,
        timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "concat (4 ops)" in shown.stdout and "concat_3" not in shown.stdout
    every = subprocess.run(
        [sys.executable, "-m", "simsync", "graph", program, "--every-op"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert every.returncode == 0 and "concat_3" in every.stdout


_EXPORT = """
import sys
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
with tf.device("/cpu:0"):
    w = tf.get_variable("w", [16, 4])
grads = []
for i in range(2):
    with tf.device("/gpu:%d" % i), tf.name_scope("tower_%d" % i):
        x = tf.random.normal([8, 16])
        loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
        grads.append(tf.gradients(loss, [w])[0])
with tf.device("/cpu:0"):
    mean = tf.reduce_mean(tf.stack(grads), axis=0)
    train = tf.train.GradientDescentOptimizer(0.01).apply_gradients([(mean, w)])
tf.add_to_collection(tf.GraphKeys.TRAIN_OP, train)
tf.train.export_meta_graph(sys.argv[1])
"""


def test_a_metagraphdef_is_imported_without_running_the_program(tmp_path):
    (tmp_path / "export.py").write_text(_EXPORT)
    meta = tmp_path / "model.meta"
    subprocess.run([sys.executable, str(tmp_path / "export.py"), str(meta)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    imported = import_program(meta)
    graph = imported.graph
    # the exported graph: two towers whose gradients one stack takes, its train op the loop
    assert sorted(graph.towers) == [0, 1]
    assert [c.name for c in graph.clients] == ["main"]
    assert len(sync_points(graph)) == 1
    assert any(op.writes == ("w",) for op in graph.ops())


def test_a_feed_dict_program_of_unknown_batch_size_imports_with_the_shapes_it_ran():
    # the beginners' tutorial's way: placeholders of shape [None, ...], an InteractiveSession,
    # train_step.run(feed_dict), Tensor.eval; its batch of 100 is only known as it runs
    imported = import_program(PROGRAMS / "softmax_feed.py", processes=1)
    graph = imported.graph
    assert [c.name for c in graph.clients] == ["main"]
    assert imported.report["ignored"]["placeholders (fed by sess.run)"] == 2
    logits = graph.tensor("MatMul", "add")
    assert logits.shape == (100, 10) and logits.nbytes == 100 * 10 * 4
    assert graph.variables["Variable"].shape == (784, 10)
    summary = program_summary(simulate_program(PROGRAMS / "softmax_feed.py", imported=imported))
    assert summary["towers"] == 0  # it has none
    assert summary["throughput"] == pytest.approx(100 * summary["updates_per_second"])


def test_a_loop_of_a_callable_is_the_training_loop():
    # sess.make_callable([train, loss], feed_list=[images, labels]), called with a batch of
    # 32 each step: every call is a run of its fetches, fed in the order of its feed list
    imported = import_program(PROGRAMS / "softmax_callable.py", processes=1)
    graph = imported.graph
    assert [c.name for c in graph.clients] == ["main"]
    assert imported.report["ignored"]["placeholders (fed by sess.run)"] == 2
    assert graph.tensor("MatMul", "softmax_cross_entropy_with_logits/Reshape").shape == (32, 3)
    assert graph.variables["weights"].shape == (20, 3)


def test_crosscheck_of_threads_measures_them_together_and_compares_their_updates():
    # several threads calling sess.run(train_op): measured as the program runs them, all at
    # once, so each thread's step and their updates per second are compared
    _, report = crosscheck_program(PROGRAMS / "async_threads.py", runs=1, traced=3, untraced=10)
    threads = {c["client"] for c in report["step_time"]}
    assert len(threads) >= 2, report["step_time"]
    updates = report["updates_per_second"]
    assert updates["predicted"] > 0 and updates["measured"] > 0
    assert isinstance(updates["ok"], bool)


def test_a_program_made_of_a_package_imports_with_the_folders_below_it(tmp_path):
    """The held-out Inception trainer imports its model from a package of its own
    (`from inception.slim import ops`): the folders below the program go with it into the
    sandbox; a module in none of them is one line that says what was copied."""
    package = tmp_path / "model" / "layers"
    package.mkdir(parents=True)
    (tmp_path / "model" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "softmax.py").write_text((PROGRAMS / "softmax_feed.py").read_text())
    (tmp_path / "train.py").write_text("from model.layers import softmax  # noqa: F401\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "other.py").write_text("raise SystemExit('not copied')\n")
    imported = import_program(tmp_path / "train.py", cache=False)
    assert len(imported.graph.variables) == 2  # the module's W and b, trained in its loop
    missing = tmp_path / "alone.py"
    missing.write_text("import nowhere_to_be_found\n")
    with pytest.raises(ProgramError) as raised:
        import_program(missing, cache=False)
    message = str(raised.value)
    assert "ModuleNotFoundError" in message and "folders below it" in message, message


def test_an_export_a_program_says_unasked_is_not_read(tmp_path):
    """The seventh attack: a program's own line `{"export": ...}` in a plain import made the
    parent look up a cost cache key of None (a traceback); it is not an answer there."""
    program = tmp_path / "prog.py"
    program.write_text(
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        '        os.write(fd, b\'{"export": {"meta": "AAAA", "clients": [], '
        '"made_in": {}}}\\n\')\n'
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    with pytest.raises(ProgramError) as raised:
        import_program(program, cache=tmp_path / "cache")
    assert "\n" not in str(raised.value) and str(raised.value).startswith(str(program))


def test_a_program_of_null_bytes_gets_one_line_with_no_line_number(tmp_path):
    """The 25th attack's binary program read 'binary.py:None: SyntaxError'."""
    program = tmp_path / "binary.py"
    program.write_bytes(b"import tensorflow\x00\n")
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    one_clear_line(ran, "binary.py", "SyntaxError", "null bytes")
    assert "None" not in ran.stderr
