"""Importing TensorFlow 2 programs: a tf.function training step called in a Python loop
(tests/fixtures/programs/tf2_step.py), and a hand-written tower loop inside one
(tf2_towers.py). The expected facts are measured from TensorFlow itself, in a process of
the test's own that runs the program's step with run metadata on (research/tf2.md §1),
never taken from simsync's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import one_clear_line

from simsync.crosscheck.user_program import crosscheck_program
from simsync.errors import UsageError
from simsync.kinds import sync_points
from simsync.simulation.importing import import_program
from simsync.simulation.user_program import WhatIf, program_summary, simulate_program
from simsync.tf_backend.program.cluster import private_network
from simsync.tf_backend.program.load import ProgramError

pytestmark = pytest.mark.tf
PROGRAMS = Path(__file__).parent / "fixtures" / "programs"

#: runs a program's step twice (its loop is not run: its module is not __main__) with run
#: metadata on, and says what TensorFlow itself recorded of the step's largest graph
#: runs CALL (the program's step, twice) with run metadata on, in a process of the test's own
RECORDED = r"""
import collections, json, os, runpy, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ.pop("TF_ENABLE_ONEDNN_OPTS", None)  # TensorFlow's own kernels, as simsync's child's
import tensorflow as tf
from tensorflow.python.eager import context
names = runpy.run_path(sys.argv[1], run_name="measured")
context.context().enable_run_metadata()
CALL
graphs = context.context().export_run_metadata().function_graphs
step = max(graphs, key=lambda g: len(g.post_optimization_graph.node))
nodes = step.post_optimization_graph.node
devices = {n.name: n.device for p in step.partition_graphs for n in p.node}
"""
MEASURE = (
    RECORDED.replace("CALL", 'for _ in range(2):\n    names["train_step"](*names["batch"]())')
    + r"""
print(json.dumps({
    "types": collections.Counter(n.op for n in nodes),
    "returned": [n.input[0].split(":")[0] for n in nodes if n.op == "_Retval"],
    "concats": sorted(n.name for n in nodes if n.op == "ConcatV2"),
    "devices": {n.name: devices.get(n.name, n.device) for n in nodes},
    "variables": sorted(v.name.split(":")[0] for v in names["variables"]),
}))
"""
)


def measured(program: str, script: str = MEASURE) -> dict:
    """What ``script`` (:data:`MEASURE`) says of ``program``, run in a process of its own."""
    ran = subprocess.run(
        [sys.executable, "-c", script, str(PROGRAMS / program)],
        capture_output=True, text=True, timeout=300, env={**os.environ},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def step():
    return import_program(PROGRAMS / "tf2_step.py", cache=False, processes=1)


@pytest.fixture(scope="module")
def towers():
    return import_program(PROGRAMS / "tf2_towers.py", cache=False, processes=1)


def _types(imported) -> Counter:
    """The TensorFlow types of the ops the imported graph runs, as its process said them."""
    kept = set(imported.graph.nx)
    return Counter(op["type"] for op in imported.data["ops"] if op["name"] in kept)


def test_a_tf_function_step_is_the_graph_tensorflow_ran(step):
    truth = measured("tf2_step.py")
    ignored = {"Const", "_Arg", "_Retval"}
    expected = Counter({t: n for t, n in truth["types"].items() if t not in ignored})
    # every op TensorFlow ran in the step is an op of the graph, by its kind; the arguments
    # carrying variables are the variables
    assert _types(step) == expected
    graph = step.graph
    trainable = {v for v, var in graph.variables.items() if var.trainable}
    assert trainable == set(truth["variables"])
    ignored_counts = step.report["ignored"]
    assert (
        ignored_counts["a tf.function's results (returned by its call)"]
        == truth["types"]["_Retval"]
    )
    assert (
        ignored_counts["constants (their values exist before the step starts)"]
        == truth["types"]["Const"]
    )
    # the loop calling the step is the one client; it fetches what the step returns
    (client,) = graph.clients
    assert client.name == "main"
    assert client.fetches[0] == truth["returned"][0]
    # each variable is written by the optimizer's update in the step
    written = {v for op in graph.ops() for v in op.writes}
    assert trainable <= written
    assert not sync_points(graph) and not graph.towers
    # costs from TensorFlow's profiler: every MatMul timed
    matmuls = [op for op in graph.ops() if _type(step, op.name) == "MatMul"]
    assert len(matmuls) == truth["types"]["MatMul"] and all(op.cost.mean > 0 for op in matmuls)
    assert step.profile["clients"]["MainThread"]["wall"] > 0


def _type(imported, name: str) -> str:
    return next(op["type"] for op in imported.data["ops"] if op["name"] == name)


def test_a_hand_written_tower_loop_averages_at_its_sync_points(towers):
    truth = measured("tf2_towers.py")
    graph = towers.graph
    ignored = {"Const", "_Arg", "_Retval"}
    assert _types(towers) == Counter({t: n for t, n in truth["types"].items() if t not in ignored})
    assert sorted(graph.towers) == [0, 1]
    points = sync_points(graph)
    # average_gradients' concat of each variable's gradients is where the towers meet
    assert truth["concats"] and set(truth["concats"]) <= set(points)
    for name in truth["concats"]:
        assert towers.report["made_in"][name].startswith("average_gradients (")
    # each tower's ops on the device TensorFlow placed them on: its own logical CPU
    for op in graph.ops():
        if op.name in truth["devices"] and op.tower is not None:
            placed = truth["devices"][op.name]
            assert op.device == f"/cpu:{placed.rsplit(':', 1)[-1]}"
    # (a MatMul whose kernel is oneDNN's, TensorFlow's default on an x86 CPU, is renamed:
    # _MklMatMul, or fused with its bias: _FusedMatMul)
    own = {op.device for op in graph.ops() if op.tower == 1 and "MatMul" in _type(towers, op.name)}
    assert own == {"/cpu:1"}
    matmuls = [op for op in graph.ops() if "MatMul" in _type(towers, op.name)]
    counted = sum(n for t, n in truth["types"].items() if "MatMul" in t)
    assert len(matmuls) == counted and all(op.cost.mean > 0 for op in matmuls)
    (client,) = graph.clients
    assert client.fetches[0] == truth["returned"][0]


def test_what_if_more_towers_on_a_tf2_tower_loop(towers):
    run = simulate_program("tf2_towers.py", WhatIf(towers=4), imported=towers, steps=10)
    summary = program_summary(run)
    assert summary["towers"] == 4
    for point in sync_points(run.graph):
        if point.startswith("concat"):
            assert len(run.graph.inputs(point)) == 4


@pytest.fixture(scope="module")
def mirrored():
    return import_program(PROGRAMS / "tf2_mirrored.py", cache=False, processes=1)


#: the all-reduce TensorFlow ran: each replica's collective op, its device, and what its
#: group and instance keys are (the ops of one collective meet by them, by no edge)
COLLECTIVES = (
    RECORDED
    + r"""
print(json.dumps({n.name: devices[n.name] for n in nodes if n.op.startswith("Collective")}))
"""
)


def _collectives(program: str, call: str) -> dict[str, str]:
    """The collective ops TensorFlow ran in ``program``'s step (``call`` runs it twice)."""
    return measured(program, COLLECTIVES.replace("CALL", call))


def test_a_mirrored_strategys_replicas_are_towers_that_meet_at_its_all_reduce(mirrored):
    twice = 'names["distributed_train_step"](*names["batch"]()); ' * 2
    collectives = _collectives("tf2_mirrored.py", twice.strip())
    # one collective op on each replica's logical CPU (the optimizer packs the gradients)
    assert sorted(d.rsplit(":", 1)[-1] for d in collectives.values()) == ["0", "1"]
    graph = mirrored.graph
    assert sorted(graph.towers) == [0, 1]
    assert mirrored.report["tower_rule"] == "device /cpu:<i>"
    points = sync_points(graph)
    for name, device in collectives.items():
        op = graph.op(name)
        assert op.device == f"/cpu:{device.rsplit(':', 1)[-1]}"
        # each replica's op waits for every replica's gradients: a sync point of both towers
        assert name in points
        towers = {graph.op(t.src).tower for t in graph.inputs(name)} - {None}
        assert towers == {0, 1}, (name, [t.src for t in graph.inputs(name)])
        # made by the line that runs the replicas' step (the all-reduce runs in its thread)
        assert mirrored.report["made_in"][name].startswith("distributed_train_step (")
    run = simulate_program("tf2_mirrored.py", WhatIf(), imported=mirrored, steps=10)
    summary = program_summary(run)
    assert summary["towers"] == 2
    for name in collectives:
        assert summary["waited_for"][name]  # someone came last at each, every step
        assert summary["sync_points_made_in"][name].startswith("distributed_train_step (")


def test_more_towers_than_a_strategys_replicas_are_refused_with_the_reason(mirrored):
    with pytest.raises(UsageError, match="towers meet inside themselves"):
        simulate_program("tf2_mirrored.py", WhatIf(towers=4), imported=mirrored)


#: :data:`COLLECTIVES` with TensorFlow given two logical CPUs first, as ``--devices 2`` does
TWO_DEVICES = COLLECTIVES.replace(
    "import tensorflow as tf\n",
    "import tensorflow as tf\ncpu = tf.config.list_physical_devices('CPU')[0]\n"
    "two = [tf.config.LogicalDeviceConfiguration()] * 2\n"
    "tf.config.set_logical_device_configuration(cpu, two)\n",
    1,
)


def test_devices_give_a_strategy_that_takes_every_device_as_many_replicas():
    """``MirroredStrategy()`` takes the devices TensorFlow has: this machine's CPU, one
    replica, no towers. With ``devices=2`` (``--devices 2``) the program finds two logical
    CPUs, as on a machine of two GPUs: two towers that meet at the all-reduce TensorFlow
    itself builds for two (measured in a process of the test's own, given two logical CPUs
    first), and its cross-check runs it on two as well."""
    program = PROGRAMS / "tf2_mirrored_default.py"
    alone = import_program(program, cache=False, processes=1)
    assert not alone.graph.towers and not sync_points(alone.graph)
    two = import_program(program, cache=False, processes=1, devices=2)
    assert sorted(two.graph.towers) == [0, 1]
    twice = 'names["distributed_train_step"](*names["batch"]()); ' * 2
    collectives = _collectives("tf2_mirrored_default.py", twice.strip())
    assert collectives == {}  # run as written here: one replica, nothing to reduce across
    collectives = measured("tf2_mirrored_default.py", TWO_DEVICES.replace("CALL", twice.strip()))
    assert sorted(d.rsplit(":", 1)[-1] for d in collectives.values()) == ["0", "1"]
    points = sync_points(two.graph)
    for name in collectives:
        assert name in points
        assert {two.graph.op(t.src).tower for t in two.graph.inputs(name)} - {None} == {0, 1}
    run, report = crosscheck_program(program, runs=1, traced=3, untraced=5, devices=2)
    assert report["structure"]["ok"] and report["structure"]["checked"] > 0
    assert program_summary(run)["towers"] == 2


def test_devices_are_refused_for_a_graph_file_and_beyond_their_range(tmp_path):
    meta = tmp_path / "model.meta"
    meta.write_bytes(b"")
    for path, devices, said in ((meta, 2, "MetaGraphDef"), (PROGRAMS / "tf2_step.py", 0, "1 to")):
        with pytest.raises(ProgramError, match=said) as refused:
            import_program(path, devices=devices)
        assert "\n" not in str(refused.value)
    for given, said in (("2", "--devices changes an imported TensorFlow program"), ("0", "1 to")):
        ran = subprocess.run(
            [sys.executable, "-m", "simsync", "simulate", "examples/four_towers.toml",
             "--devices", given],
            capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1],
        )  # fmt: skip
        assert ran.returncode == 2 and said in ran.stderr and "Traceback" not in ran.stderr


def test_synchronized_batch_norm_meets_at_its_statistics_and_the_optimizers_all_reduce():
    """Keras' synchronized batch norm all-reduces each replica's statistics (forward) and
    their gradients (backward) with instance keys counted as the step runs, alike when it
    was traced: matched as one collective they made a cycle and the import failed ("the
    graph has a cycle: .../batch_normalization_1/CollectiveReduceV2 -> ...")."""
    twice = 'names["distributed_train_step"](*names["batch"]()); ' * 2
    collectives = _collectives("tf2_sync_bn.py", twice.strip())
    imported = import_program(PROGRAMS / "tf2_sync_bn.py", cache=False, processes=1)
    graph, points = imported.graph, sync_points(imported.graph)
    statistics = [n for n in collectives if "batch_normalization" in n]
    assert len(statistics) >= 4 and len(collectives) > len(statistics)
    # the statistics' sums meet as sync points (the count of examples, all-reduced too, is
    # of constants: ready at once on every replica, so no replica waits for it)
    met = [n for n in statistics if n in points]
    assert len(met) >= 4, (met, statistics)
    for name, device in collectives.items():
        assert graph.op(name).device == f"/cpu:{device.rsplit(':', 1)[-1]}"
        if name in statistics and name not in met:
            continue
        assert name in points, name  # every replica's collective waits for every replica
        towers = {graph.op(t.src).tower for t in graph.inputs(name)} - {None}
        assert towers == {0, 1}, (name, [t.src for t in graph.inputs(name)])
    run = simulate_program("tf2_sync_bn.py", WhatIf(speeds=(1.0, 0.5)), imported=imported)
    last = program_summary(run)["waited_for"]
    # the half-speed replica is the one waited for at its statistics' all-reduce too, in
    # most steps: TensorFlow's own work in a step, timed afresh at each import, is most of a
    # step here and moves which replica ends last now and then (measured 84 to 100 of 100)
    assert {name: last[name] for name in met if last[name].get("tower_1", 0) <= 70} == {}


def test_keras_fit_under_a_mirrored_strategy_meets_at_its_all_reduce():
    fit = 'names["model"].fit(names["dataset"], epochs=1, steps_per_epoch=2, verbose=0)'
    collectives = _collectives("tf2_fit_mirrored.py", fit)
    assert sorted(d.rsplit(":", 1)[-1] for d in collectives.values()) == ["0", "1"]
    fitted = import_program(PROGRAMS / "tf2_fit_mirrored.py", cache=False, processes=1)
    graph = fitted.graph
    assert sorted(graph.towers) == [0, 1]
    points = sync_points(graph)
    for name, device in collectives.items():
        # each replica's op of the all-reduce, inlined from Keras' step into fit's function
        assert name in points, (name, points)
        assert graph.op(name).device == f"/cpu:{device.rsplit(':', 1)[-1]}"
        towers = {graph.op(t.src).tower for t in graph.inputs(name)} - {None}
        assert towers == {0, 1}
        assert fitted.report["made_in"][name].startswith("<module> (")
    (client,) = graph.clients
    assert client.name == "main"


def test_another_strategy_is_refused_in_one_line(tmp_path):
    source = (PROGRAMS / "tf2_mirrored.py").read_text()
    program = tmp_path / "central.py"
    program.write_text(
        source.replace(
            'strategy = tf.distribute.MirroredStrategy(["/cpu:%d" % i for i in range(REPLICAS)])',
            "strategy = tf.distribute.experimental.CentralStorageStrategy()",
        )
    )
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    one_clear_line(ran, "central.py", "CentralStorageStrategy", "not imported yet", "tf.function")


#: runs a ParameterServerStrategy program until it schedules its step a second time, then
#: says what TensorFlow traced of that step (the function a coordinator's worker runs) and
#: where it placed the variables, in a process of the test's own
SCHEDULED = r"""
import collections, json, os, runpy, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
from tensorflow.python.distribute.coordinator import cluster_coordinator as cc
from tensorflow.python.util import nest
real, seen, got = cc.ClusterCoordinator.schedule, collections.Counter(), {}
class Stop(Exception):
    pass
def schedule(self, fn, args=None, kwargs=None):
    seen[id(fn)] += 1
    if seen[id(fn)] == 2:
        got.update(coordinator=self, fn=fn, args=args or ())
        raise Stop()
    return real(self, fn, args=args, kwargs=kwargs)
cc.ClusterCoordinator.schedule = schedule
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
except Stop:
    pass
coordinator = got["coordinator"]
specs = nest.map_structure(cc._maybe_as_type_spec, cc._select_worker_slice(0, got["args"]))
with coordinator.strategy.scope():
    graph = got["fn"].get_concrete_function(*specs).graph
nodes = graph.as_graph_def().node
print(json.dumps({
    "types": collections.Counter(n.op for n in nodes),
    "updates": {n.name: n.device for n in nodes if n.op == "AssignSubVariableOp"},
    "variables": {v.name.split(":")[0]: v.device for v in graph.trainable_variables},
    "workers": [w.device_name for w in coordinator._cluster.workers],
}))
sys.stdout.flush()
os._exit(0)  # its servers' threads can abort the interpreter's exit ("exception not rethrown")
"""


@pytest.fixture(scope="module")
def parameter_server():
    return import_program(PROGRAMS / "tf2_parameter_server.py", cache=False, processes=1)


def _scheduled(program: str) -> dict:
    """What :data:`SCHEDULED` says of ``program``, its servers in a private network (they
    listen on every interface)."""
    with private_network() as enter:
        ran = subprocess.run(
            [*enter, sys.executable, "-c", SCHEDULED, str(PROGRAMS / program)],
            capture_output=True, text=True, timeout=300, env={**os.environ},
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_a_parameter_server_strategys_workers_are_asynchronous_clients(parameter_server):
    """TensorFlow's parameter-server tutorial, in shape: an in-process cluster of 2 workers
    and a parameter server (on the sandbox's loopback), a ClusterCoordinator that schedules
    the step on whichever worker is free. Each worker is a client that runs the step as
    TensorFlow traced it, its ops on its own task, the variables shared on the parameter
    server where the updates run; nothing of one worker's step waits for the other's."""
    truth = _scheduled("tf2_parameter_server.py")
    imported, graph = parameter_server, parameter_server.graph
    workers = [f"worker_{k}" for k in range(len(truth["workers"]))]
    assert len(workers) == 2 and [c.name for c in graph.clients] == workers
    for k, worker in enumerate(workers):
        own = [op for op in graph.ops() if op.name.startswith(f"{worker}/")]
        types = Counter(_type(imported, op.name) for op in own)
        # each kind of work TensorFlow traced, once per worker
        for kind in ("MatMul", "AssignSubVariableOp", "SparseSoftmaxCrossEntropyWithLogits"):
            assert types[kind] == truth["types"][kind], kind
        task = f"/job:worker/task:{k}"
        for op in own:
            if _type(imported, op.name) == "MatMul":
                assert op.device == task
            if _type(imported, op.name) == "AssignSubVariableOp":  # where TensorFlow put it
                assert truth["updates"][op.name.split("/", 1)[1]].startswith("/job:ps/")
                assert op.device == "/job:ps/task:0"
        # the client of a worker fetches its own step's ops only
        (client,) = [c for c in graph.clients if c.name == worker]
        assert all(name.startswith(f"{worker}/") for name in client.fetches)
        assert set(truth["variables"]) <= {v for op in own for v in op.writes}
    # one variable each, on the parameter server, shared by the workers
    for name, device in truth["variables"].items():
        assert device.startswith("/job:ps/") and graph.variables[name].device == "/job:ps/task:0"
    assert not sync_points(graph)  # no all-reduce: each step writes the variables itself
    assert all(imported.profile["clients"][w]["wall"] > 0 for w in workers)


def test_a_parameter_server_strategy_simulates_stale_updates_and_more_workers(parameter_server):
    """Both workers apply their updates, as they come (asynchronously: each reads the
    variables when its step needs them); a what-if of 4 workers adds 2 copies of the
    first, each on a worker task of its own, as a cluster of 4 workers would run it."""
    run = simulate_program("tf2_parameter_server.py", imported=parameter_server, steps=50)
    summary = program_summary(run)
    assert summary["updating_clients"] == 2 and not summary["sync_points"]
    by_worker = summary["staleness_by_client"]
    assert {w: c["applied"] for w, c in by_worker.items()} == {"worker_0": 50, "worker_1": 50}
    assert summary["updates_applied"] == 100 and summary["updates_per_second"] > 0
    more = simulate_program(
        "tf2_parameter_server.py", WhatIf(towers=4), imported=parameter_server, steps=20
    )
    assert sorted(c.name for c in more.graph.clients) == [f"worker_{k}" for k in range(4)]
    kinds = [
        Counter(op.name.split("/", 1)[1] for op in more.graph.ops() if op.tower == k)
        for k in range(4)
    ]
    assert kinds[0] and all(kind == kinds[0] for kind in kinds)  # the same step on each
    for k in range(4):  # each on a worker task of its own, the updates on the server
        devices = {op.device for op in more.graph.ops() if op.tower == k}
        assert devices == {f"/job:worker/task:{k}", "/job:ps/task:0"}


def test_a_parameter_server_strategys_cross_check_compares_its_staleness(parameter_server):
    """Run again on TensorFlow, the workers' steps together: each worker's step time, the
    updates per second, and the staleness, read off TensorFlow's own kernels (when each
    step read each variable on the parameter server and when each update landed there),
    round by round, against the prediction. The workers read and write the one server
    while the other's step is on the way: some updates land on variables the other
    changed since its step read them, as the profiler shows."""
    run, report = crosscheck_program(PROGRAMS / "tf2_parameter_server.py", runs=2)
    assert report["structure"]["ok"], report["structure"]["violations"][:3]
    assert [s["client"] for s in report["step_time"]] == ["worker_0", "worker_1"]
    assert all(s["measured"] > 0 for s in report["step_time"])
    assert report["updates_per_second"]["measured"] > 0
    stale = report["staleness"]
    # the variables TensorFlow placed on the server and the step updates: the model's two
    # and the optimizer's count of steps (its own variable there)
    truth = _scheduled("tf2_parameter_server.py")
    assert set(truth["variables"]) <= set(stale["variables"])
    # every round read off whole: where TensorFlow left a read or an update untraced, the
    # _Send beside it (traced in every step) says when
    assert stale["read_off"] == stale["rounds"] > 0
    evidence = stale["evidence"]
    assert evidence["updates"] == stale["rounds"] * 25 * 2  # 25 steps of each of 2 workers
    assert 0 < evidence["mean"] < 1 and evidence["verdict"] == "yes"
    low, high = evidence["interval"]
    assert 0 < low <= evidence["median_block"] <= high < 1
    assert 0 <= evidence["predicted"] < 1 and run.simulation.trace.updates


#: Keras fit() on arrays: one pass over them an epoch, a new iterator each epoch
FIT_ARRAYS = """
import numpy as np
import tensorflow as tf
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = rng.integers(0, 2, size=256).astype("int32")
model = tf.keras.Sequential([tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(2)])
model.compile(optimizer="sgd",
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=64, epochs=100, verbose=0)
"""


def test_a_fit_whose_epoch_ends_while_timed_says_how_to_time_it(tmp_path):
    program = tmp_path / "fit_arrays.py"
    program.write_text(FIT_ARRAYS)
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    one_clear_line(ran, "fit_arrays.py", "input ran out", "repeat()", "steps_per_epoch")


# ## MultiWorkerMirroredStrategy: one process per worker, run as its cluster -------------

#: each worker of tf2_multi_worker.py, told its place by TF_CONFIG (argv: the program, the
#: worker's index, the cluster's addresses), runs its step twice with run metadata on and
#: says the collective ops TensorFlow ran and their devices
MULTI_WORKER_TRUTH = (
    r"""
import json, os, sys
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": sys.argv[3].split(",")},
                                      "task": {"type": "worker", "index": int(sys.argv[2])}})
"""
    + RECORDED.replace(
        "CALL", 'for _ in range(2):\n    names["distributed_train_step"](next(names["iterator"]))'
    )
    + r"""
print(json.dumps({n.name: devices[n.name] for n in nodes if n.op.startswith("Collective")}))
sys.stdout.flush()
os._exit(0)  # its peer's collectives would wait for it at exit
"""
)


def _multi_worker_truth() -> list[dict[str, str]]:
    """What TensorFlow itself ran in each of the two workers of tf2_multi_worker.py, both
    started in a private network (their servers listen on every interface)."""
    addresses = "127.0.0.1:2222,127.0.0.1:2223"
    with private_network() as enter:
        workers = [
            subprocess.Popen(
                [
                    *enter,
                    sys.executable,
                    "-c",
                    MULTI_WORKER_TRUTH,
                    str(PROGRAMS / "tf2_multi_worker.py"),
                    str(k),
                    addresses,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ},
            )
            for k in range(2)
        ]
        try:
            said = [worker.communicate(timeout=300) for worker in workers]
        finally:
            for worker in workers:  # it catches SIGTERM and goes on waiting for its peer
                worker.kill()
    for worker, (_, err) in zip(workers, said, strict=True):
        assert worker.returncode == 0, err[-2000:]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in said]


@pytest.fixture(scope="module")
def multi_worker():
    return import_program(
        PROGRAMS / "tf2_multi_worker.py", cache=False, processes=1, tasks={"worker": 2}
    )


def test_a_multi_worker_strategys_workers_are_towers_that_meet_at_their_all_reduces(
    multi_worker,
):
    """Each worker a process of its own, run as its cluster: each worker a tower on its
    task, every worker's all-reduce (the optimizer's, of the gradients; the loss's
    ``strategy.reduce``) taking every worker's data, so each is a sync point of both, and
    the workers' loops one client, as their steps meet at every all-reduce."""
    truth = _multi_worker_truth()
    graph = multi_worker.graph
    assert sorted(graph.towers) == [0, 1]
    assert [c.name for c in graph.clients] == ["main"]
    points = sync_points(graph)
    for k, collectives in enumerate(truth):
        # the optimizer packs the gradients into one all-reduce; the loss is another
        assert len(collectives) == 2 and all(f"task:{k}" in d for d in collectives.values())
        for name in collectives:
            op = graph.op(f"worker_{k}/{name}")
            assert op.device == f"/job:worker/task:{k}"
            assert op.name in points
            towers = {graph.op(t.src).tower for t in graph.inputs(op.name)} - {None}
            assert towers == {0, 1}, (op.name, [t.src for t in graph.inputs(op.name)])
    run = simulate_program(
        "tf2_multi_worker.py", WhatIf(speeds=(1.0, 0.5)), imported=multi_worker, steps=20
    )
    last = program_summary(run)["waited_for"]
    gradients = [f"worker_{k}/{n}" for k in (0, 1) for n in truth[k] if "sgd" in n]
    assert len(gradients) == 2
    # the half-speed worker is the one the other waits for at the gradients' all-reduce
    assert all(last[name].get("worker_1", 0) >= 18 for name in gradients), last


def test_a_multi_worker_strategy_outside_a_cluster_is_one_clear_line():
    """Without a cluster (no TF_CONFIG), TensorFlow would make one worker of one replica:
    the program is told how to run as its cluster instead."""
    program = PROGRAMS / "tf2_multi_worker.py"
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    one_clear_line(ran, "MultiWorkerMirroredStrategy", "no TF_CONFIG", "--tasks worker=2")


def test_a_multi_worker_strategys_cross_check_runs_its_cluster_again(multi_worker):
    """Each run a fresh cluster of two processes, the first worker's steps traced (with the
    profiler on in both, the second crashed now and then: cluster.traces), its structure
    checked against the prediction and the one client's step compared."""
    _, report = crosscheck_program(PROGRAMS / "tf2_multi_worker.py", runs=2, tasks={"worker": 2})
    assert report["structure"]["ok"], report["structure"]["violations"][:3]
    assert report["structure"]["checked"] > 100
    (step,) = report["step_time"]
    assert step["client"] == "main" and step["measured"] > 0 and step["predicted"] > 0
    assert report["tasks"] == {"worker": 2} and report["same_graph"]


#: a step with a ``Cast`` fed by a dataset whose ``map`` has a ``Cast`` of its own, traced as a
#: step is (:func:`simsync.tf_backend.program.function_costs._traced`): the step's node's
#: kernels counted with tf.data's threads left out, and with them kept
DATA_CASTS = r"""
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
from simsync.tf_backend.program import function_costs

# images large enough that their Cast is never an inexpensive kernel (run inline, untraced),
# and a short prefetch, so that the map runs while the steps do
images = tf.data.Dataset.from_tensors(tf.zeros([512, 512], tf.uint8)).repeat()
data = iter(images.map(lambda x: tf.cast(x, tf.float32)).prefetch(2))

@tf.function
def step(x):
    return tf.cast(x, tf.float64) * 2.0

graph = step.get_concrete_function(next(data)).graph.as_graph_def()
node = next(n.name for n in graph.node if n.op == "Cast")

def run():
    for _ in range(20):
        step(next(data))

def casts():
    (kernels,) = function_costs._traced(tf, 1, run, {node: "/cpu:0"})
    return sum(1 for name, _, _ in kernels if name == node)

kept = casts()
function_costs.DATA_THREADS = "no thread's name"
print(json.dumps({"calls": 20, "kept": kept, "all": casts()}))
"""


def test_kernels_of_a_datasets_functions_are_not_the_steps():
    """The held-out "Distributed training with Keras" tutorial maps its images with a
    ``scale`` whose ``Cast`` runs in tf.data's threads, hundreds of times beside the step's
    own ``Cast``: taken for the step's, they were 20 false violations of its order. The
    profiler's tf.data lines are left out: a step's node has only its own kernels (run in a
    process of its own: eager, as a program's step is)."""
    ran = subprocess.run(
        [sys.executable, "-c", DATA_CASTS], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    assert found["kept"] <= found["calls"] < found["all"]  # the dataset's own, had they been kept
