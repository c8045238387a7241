"""Importing a program, the parts that need no TensorFlow: towers from names, the conversion
of a graph described as data, the what-ifs, the CLI's options, docs/importing.md."""

from __future__ import annotations

import dataclasses
import doctest
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import one_clear_line

from simsync.errors import UsageError
from simsync.ir import Cost
from simsync.kinds import sync_points
from simsync.tf_backend.program.convert import convert
from simsync.tf_backend.program.whatif import with_towers

ROOT = Path(__file__).parent.parent


def _op(name, kind="MatMul", inputs=(), control=(), device=""):
    return {
        "name": name, "type": kind, "device": device, "colocate": [], "control": list(control),
        "inputs": [{"op": i, "slot": 0, "shape": [4, 4], "dtype": "float32", "bytes": 64}
                   for i in inputs],
        "made_in": None,
    }  # fmt: skip


def _two_towers():
    """Two towers' gradients meeting in a concat, the apply waiting through a constant."""
    ops = [_op("w", "VarHandleOp", device="/device:CPU:0")]
    for i in (0, 1):
        ops += [
            _op(f"tower_{i}/read", "ReadVariableOp", ["w"], device=f"/device:GPU:{i}"),
            _op(f"tower_{i}/fwd", "MatMul", [f"tower_{i}/read"], device=f"/device:GPU:{i}"),
            _op(f"tower_{i}/grad", "MatMul", [f"tower_{i}/fwd"], device=f"/device:GPU:{i}"),
            _op(f"ExpandDims_{i}/dim", "Const"),
            _op(f"ExpandDims_{i}", "ExpandDims", [f"tower_{i}/grad", f"ExpandDims_{i}/dim"]),
        ]
    ops += [
        _op("concat", "ConcatV2", ["ExpandDims_0", "ExpandDims_1"], device="/device:CPU:0"),
        _op("apply", "ResourceApplyGradientDescent", ["w", "concat"], device="/device:CPU:0"),
        _op("step/Const", "Const", control=["apply"]),
        _op("step", "AssignAddVariableOp", ["step/Const"], device="/device:CPU:0"),
        _op("init", "NoOp", control=["w"]),
    ]
    return {
        "program": "two.py", "order": [op["name"] for op in ops], "ops": ops,
        "clients": [{"thread": "MainThread", "name": "main", "fetches": ["step"]}],
        "trainable": ["w"],
    }  # fmt: skip


def test_convert_finds_towers_sync_points_and_says_what_it_ignored():
    graph, report = convert(_two_towers(), None)
    assert sorted(graph.towers) == [0, 1]
    assert sync_points(graph) == ["concat"]
    assert graph.op("apply").writes == ("w",) and graph.op("tower_1/read").reads == ("w",)
    assert graph.variables["w"].device == "/cpu:0" and graph.variables["w"].trainable
    assert graph.op("tower_1/grad").device == "/gpu:1"
    # the step's constant waited for the apply: the wait is kept as a control edge
    assert [t.control for t in graph.tensors("apply", "step")] == [True]
    assert report["ignored"] == {
        "constants (their values exist before the step starts)": 3,
        "variables (kept as variables, not ops)": 1,
        "not run by the training loop": 1,
    }
    assert graph.tensor("tower_0/fwd", "tower_0/grad").nbytes == 64


def test_more_towers_are_copies_of_tower_0():
    graph, _ = convert(_two_towers(), None)
    bigger, line = with_towers(graph, 5)
    assert sorted(bigger.towers) == [0, 1, 2, 3, 4]
    assert len(bigger.inputs("concat")) == 5
    assert bigger.op("tower_4/grad").device == "/gpu:4"
    assert bigger.op("tower_4/read").reads == ("w",)
    assert sync_points(bigger) == ["concat"]
    assert line.endswith("3 more replicated from tower_0")
    fewer, _ = with_towers(graph, 1)
    assert sorted(fewer.towers) == [0] and "tower_1/grad" not in fewer.nx


def _async_threads(threads=2):
    """Asynchronous threads: each runs its own tower's train op, reading and updating the
    shared variable on /cpu:0 (its read there, outside the tower's scope)."""
    ops = [_op("w", "VarHandleOp", device="/device:CPU:0")]
    clients = []
    for i in range(threads):
        suffix = f"_{i}" if i else ""
        ops += [
            _op(f"read{suffix}", "ReadVariableOp", ["w"], device="/device:CPU:0"),
            _op(f"tower_{i}/fwd", "MatMul", [f"read{suffix}"], device=f"/device:GPU:{i}"),
            _op(f"tower_{i}/grad", "MatMul", [f"tower_{i}/fwd"], device=f"/device:GPU:{i}"),
            _op(f"apply{suffix}", "ResourceApplyGradientDescent", ["w", f"tower_{i}/grad"],
                device="/device:CPU:0"),
        ]  # fmt: skip
        clients.append({"thread": f"T{i}", "name": f"thread_{i}", "fetches": [f"apply{suffix}"]})
    return {
        "program": "threads.py", "order": [op["name"] for op in ops], "ops": ops,
        "clients": clients, "trainable": ["w"],
    }  # fmt: skip


def test_more_towers_of_asynchronous_threads_bring_their_threads():
    """A thread that runs one tower's train op is copied with its tower, and goes with it."""
    graph, _ = convert(_async_threads(), None)
    assert sync_points(graph) == []
    bigger, _ = with_towers(graph, 4)
    clients = {c.name: c.fetches for c in bigger.clients}
    assert clients["thread_0"] == ("apply",) and clients["thread_1"] == ("apply_1",)
    assert clients["thread_2"] == ("apply [tower_2]",)
    assert clients["thread_3"] == ("apply [tower_3]",)
    assert bigger.op("tower_3/grad").device == "/gpu:3"
    # the read depends on no tower: the copies read through tower 0's, each run its own
    assert [t.src for t in bigger.inputs("tower_3/fwd")] == ["read"]
    assert sync_points(bigger) == []
    # one tower: thread_1 goes, and so does the read only it ran
    fewer, _ = with_towers(graph, 1)
    assert [c.name for c in fewer.clients] == ["thread_0"]
    assert "read_1" not in fewer.nx and "apply_1" not in fewer.nx and "read" in fewer.nx


def _hogwild(threads=3):
    """Hogwild: no towers, ``threads`` threads running one train op on one graph."""
    ops = [
        _op("w", "VarHandleOp", device="/device:CPU:0"),
        _op("read", "ReadVariableOp", ["w"], device="/device:CPU:0"),
        _op("grad", "MatMul", ["read"], device="/device:CPU:0"),
        _op("apply", "ResourceApplyGradientDescent", ["w", "grad"], device="/device:CPU:0"),
    ]
    clients = [{"thread": f"T{i}", "name": f"thread_{i}", "fetches": ["apply"]}
               for i in range(threads)]  # fmt: skip
    return {"program": "hogwild.py", "order": [op["name"] for op in ops], "ops": ops,
            "clients": clients, "trainable": ["w"]}  # fmt: skip


def test_more_threads_of_one_train_op_where_a_program_has_no_towers():
    graph, _ = convert(_hogwild(3), None)
    assert not graph.towers
    bigger, line = with_towers(graph, 5)
    assert [c.name for c in bigger.clients] == [f"thread_{i}" for i in range(5)]
    assert all(c.fetches == ("apply",) for c in bigger.clients)
    assert line == "5 threads: 3 threads as the program ran them, 2 more like thread_0"
    assert set(bigger.nx) == set(graph.nx)  # the threads share the program's one graph
    fewer, line = with_towers(graph, 2)
    assert [c.name for c in fewer.clients] == ["thread_0", "thread_1"]
    assert line == "2 threads: the program's first 2 of 3"
    one_loop, _ = convert(_hogwild(1), None)
    with pytest.raises(UsageError, match="no towers to replicate, nor threads"):
        with_towers(one_loop, 4)


def test_program_options_are_refused_for_a_scenario():
    scenario = ROOT / "examples" / "four_towers.toml"
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(scenario), "--towers", "4"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    one_clear_line(ran, "--towers", "scenario")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "JSON syntax error: Expecting value (at line 1, column 1)"),
        ('{"key": "k", "profile": {"ops": []}}', "not a costs file"),
    ],
)
def test_a_costs_file_that_is_not_one(tmp_path, content, said):
    from simsync.errors import UsageError
    from simsync.tf_backend.program.cost_cache import load_costs

    path = tmp_path / "costs.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=re.escape(f"{path}: {said}")):
        load_costs(path)


def test_docs_importing_examples_run():
    result = doctest.testfile(
        str(ROOT / "docs" / "importing.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["examples/four_towers.toml", "--runs", "2"], ["--runs", "scenario"]),
        (["examples/four_towers.toml", "--", "4"], ["-- ARGS", "scenario"]),
        (["train.py", "--speeds", "1,0.5"], ["--speeds", "cannot be run on TensorFlow"]),
        (["train.py", "--trace", "t.json"], ["--trace is for a scenario", "--runs"]),
        (["train.py", "--seed", "3"], ["--seed is for a scenario", "--runs"]),
    ],
)
def test_crosscheck_refuses_what_it_cannot_check(argv, words):
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "crosscheck", *argv],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    one_clear_line(ran, *words)


def _two_tower_graph():
    from simsync.ir import Client, Cost, Device, Graph, Op, Tensor

    graph = Graph()
    for device in ("/cpu:0", "/gpu:0", "/gpu:1"):
        graph.add_device(Device(device))
    graph.add_op(Op("concat", "generic", "/cpu:0", Cost(0.001)))
    for i in (0, 1):
        graph.add_op(Op(f"tower_{i}/grad", "generic", f"/gpu:{i}", Cost(0.001 * (i + 1)), tower=i))
        graph.add_tensor(Tensor(f"tower_{i}/grad", "concat", 400))
    graph.add_client(Client("main", ("concat",)))
    return graph


def test_the_program_report_checks_order_arrivals_and_step_time():
    from simsync.crosscheck.user_program import program_report
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate

    graph = _two_tower_graph()  # tower_1's gradient costs twice tower_0's: it comes last
    scenario = Scenario("two", cluster=ClusterConfig(devices=2)).with_run(steps=10)
    simulation = simulate(scenario, numerics=False, graph=graph)
    # [name, device, start, end, when its outputs existed]
    in_order = [["tower_0/grad", "/gpu:0", 0.0, 1.0, 1.0],
                ["tower_1/grad", "/gpu:1", 0.0, 2.0, 2.0],
                ["concat", "/cpu:0", 2.5, 3.0, 3.0],
                ["Const", "/cpu:0", 0.0, 0.1, 0.1]]  # fmt: skip
    early = [r if r[0] != "concat" else ["concat", "/cpu:0", 1.5, 3.0, 3.0] for r in in_order]
    # TensorFlow's executor hands tower_1/grad's output on, then records its end: preempted in
    # between, it ends after concat started, its output there before (measured: 81 us)
    preempted = [r if r[0] != "tower_1/grad" else [*r[:3], 2.6, 2.0] for r in in_order]
    walls = [0.003] * 5
    steps = [in_order] * 8 + [preempted, early]
    runs = [{"clients": {"MainThread": {"walls": walls, "steps": steps}}}]
    report = program_report(graph, simulation, runs, {"MainThread": "main"}, set(graph.nx))
    # 2 edges in each of 10 steps; concat began before tower_1/grad's output existed in one
    assert report["structure"]["checked"] == 20
    (violation,) = report["structure"]["violations"]
    assert violation["before"] == "tower_1/grad" and violation["after"] == "concat"
    (last,) = report["arrivals"]
    assert last["measured_last"] == {"tower_0": 0, "tower_1": 10}
    assert last["measured"] == last["predicted"] == "tower_1"
    (step,) = report["step_time"]
    # the critical path: tower_1's 2 ms, its gradient sent to the CPU, the concat's 1 ms
    assert step["measured"] == 0.003 and step["predicted"] > 0.003
    assert step["error"] == pytest.approx((step["predicted"] - 0.003) / 0.003)


def test_towers_of_equal_work_have_no_predicted_last():
    """With equal towers the simulation's pool takes them in some order and one comes last
    every step: that order is not a prediction, and the report names no tower."""
    from simsync.crosscheck.user_program import program_report
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate

    graph = _two_tower_graph()
    graph.replace_op(dataclasses.replace(graph.op("tower_1/grad"), cost=Cost(0.001)))
    scenario = Scenario("two", cluster=ClusterConfig(devices=2)).with_run(steps=10)
    simulation = simulate(scenario, numerics=False, graph=graph)
    steps = [[["tower_0/grad", "/gpu:0", 0.0, 1.0, 1.0],
               ["tower_1/grad", "/gpu:1", 0.0, 1.2, 1.2],
               ["concat", "/cpu:0", 1.5, 2.0, 2.0]]] * 10  # fmt: skip
    runs = [{"clients": {"MainThread": {"walls": [0.002] * 5, "steps": steps}}}]
    report = program_report(graph, simulation, runs, {"MainThread": "main"}, set(graph.nx))
    (last,) = report["arrivals"]
    assert last["predicted"] is None and last["equal_work"] is True
    assert last["verdict"] == "inconclusive"


def test_towers_the_simulation_has_arrive_together_have_no_predicted_last():
    """The held-out "Distributed training with Keras" tutorial: at a metric's update, the
    simulation had one replica a moment later than the other (36 us of a 16 ms step), its
    table said "together", and the cross-check still called the run's other replica, last in
    50 of 60 steps, "not as predicted". One rule for both: where none waits 1 % of a step,
    the simulation names no tower."""
    from simsync.crosscheck.user_program import program_report
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate

    graph = _two_tower_graph()  # tower_1 does more (2 ms to 1), but in a step of 0.5 s
    graph.replace_op(dataclasses.replace(graph.op("concat"), cost=Cost(0.5)))
    scenario = Scenario("two", cluster=ClusterConfig(devices=2)).with_run(steps=10)
    simulation = simulate(scenario, numerics=False, graph=graph)
    steps = [[["tower_0/grad", "/gpu:0", 0.0, 1.2, 1.2],
               ["tower_1/grad", "/gpu:1", 0.0, 1.0, 1.0],
               ["concat", "/cpu:0", 1.5, 2.0, 2.0]]] * 20  # fmt: skip
    runs = [{"clients": {"MainThread": {"walls": [0.002] * 5, "steps": steps}}}] * 3
    report = program_report(graph, simulation, runs, {"MainThread": "main"}, set(graph.nx))
    (last,) = report["arrivals"]
    assert last["measured"] == "tower_0" and last["equal_work"] is False
    assert last["predicted"] is None and last["together"] is True
    assert last["verdict"] == "inconclusive"


def test_runs_that_each_have_their_own_last_tower_name_none():
    """A process's steps are not independent: measured on tf2_mirrored.py, which replica
    TensorFlow's threads take first held for a whole run and differed between runs (51 of
    60 in all for one). Two runs with tower_0 last and one with tower_1 last name no tower;
    three runs alike name theirs."""
    from simsync.crosscheck.user_program import program_report
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate

    graph = _two_tower_graph()  # the simulation has tower_1 last
    scenario = Scenario("two", cluster=ClusterConfig(devices=2)).with_run(steps=10)
    simulation = simulate(scenario, numerics=False, graph=graph)

    def run(last: int) -> dict:
        ends = {last: 2.0, 1 - last: 1.0}
        steps = [[["tower_0/grad", "/gpu:0", 0.0, ends[0], ends[0]],
                  ["tower_1/grad", "/gpu:1", 0.0, ends[1], ends[1]],
                  ["concat", "/cpu:0", 2.5, 3.0, 3.0]]] * 20  # fmt: skip
        return {"clients": {"MainThread": {"walls": [0.003] * 5, "steps": steps}}}

    mixed = program_report(graph, simulation, [run(0), run(0), run(1)], {"MainThread": "main"},
                           set(graph.nx))  # fmt: skip
    (last,) = mixed["arrivals"]
    assert last["measured_last"] == {"tower_0": 40, "tower_1": 20}
    assert last["measured"] == "" and last["predicted"] == "tower_1"
    assert last["verdict"] == "inconclusive" and last["runs_differ"]
    alike = program_report(graph, simulation, [run(0)] * 3, {"MainThread": "main"},
                           set(graph.nx))  # fmt: skip
    (last,) = alike["arrivals"]
    assert last["measured"] == "tower_0" and last["verdict"] == "not as predicted"


def test_the_summary_of_imported_threads_names_its_workers_and_no_mode():
    """An imported graph has no pattern: its header says what ran (workers), not "None"."""
    import io

    from rich.console import Console

    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate, summary
    from simsync.viz import SummaryView

    graph, _ = convert(_async_threads(3), None)
    scenario = Scenario("threads", cluster=ClusterConfig(3)).with_run(steps=5)
    result = summary(simulate(scenario, numerics=False, graph=graph))
    assert result["workers"] == 3 and result["mode"] is None
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(SummaryView(result))
    header = out.getvalue().splitlines()[1]
    assert header.startswith("3 workers · 15 updates") and "None" not in out.getvalue()


def test_the_same_op_of_every_tower_costs_the_same():
    """A profile's costs are latencies, with the waits for a core of the few profiled steps
    in them: tower 0 measured three times as slow must not make it the straggler."""
    data = _two_towers()
    where = {op["name"]: f"/gpu:{op['name'][6]}" if op["name"].startswith("tower_") else "/cpu:0"
             for op in data["ops"]}  # fmt: skip
    timed = {name: {"seconds": 0.001, "device": device} for name, device in where.items()}
    for name in ("tower_0/fwd", "tower_0/grad", "ExpandDims_0"):
        timed[name]["seconds"] = 0.003
    timed["concat"]["seconds"] = 0.005
    data["logical_devices"] = True  # the towers share one machine's cores
    graph, _ = convert(data, {"ops": timed})
    for inside in ("fwd", "grad"):  # the median of 3 ms and 1 ms
        assert graph.op(f"tower_0/{inside}").cost.mean == graph.op(f"tower_1/{inside}").cost.mean
        assert graph.op(f"tower_1/{inside}").cost.mean == 0.002
    # ExpandDims_0 and ExpandDims_1: the same op of each tower's work, outside its scope
    assert graph.op("ExpandDims_0").cost.mean == graph.op("ExpandDims_1").cost.mean == 0.002
    assert graph.op("concat").cost.mean == 0.005  # where the towers meet: its own
    # on real GPUs a tower may be slower by its GPU: each keeps its own
    data["logical_devices"] = False
    own, _ = convert(data, {"ops": timed})
    assert own.op("tower_0/fwd").cost.mean == 0.003 and own.op("tower_1/fwd").cost.mean == 0.001


def test_the_tower_loop_as_asynchronous_threads():
    """--mode async: one thread per tower, each applying its own tower's gradients; the
    averaging (the concat) is left out, and nothing meets any more."""
    from simsync.errors import UsageError
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate, summary
    from simsync.tf_backend.program.modes import as_async

    graph, _ = convert(_two_towers(), None)
    threads, line = as_async(graph)
    assert line == (
        "asynchronous: 2 threads, one per tower, each applying its own gradients, "
        "1 op of the averaging left out"
    )
    assert {c.name: c.fetches for c in threads.clients} == {
        "thread_0": ("step [tower_0]",),
        "thread_1": ("step [tower_1]",),
    }
    assert "concat" not in threads.nx and sync_points(threads) == []
    assert [t.src for t in threads.inputs("apply [tower_1]")] == ["ExpandDims_1"]
    assert threads.op("apply [tower_1]").writes == ("w",)
    scenario = Scenario("threads", cluster=ClusterConfig(2)).with_run(steps=10)
    result = summary(simulate(scenario, numerics=False, graph=threads))
    assert result["workers"] == 2 and result["updates_applied"] == 20
    with pytest.raises(UsageError, match="already runs 2 threads, each with a loop of its own"):
        as_async(threads)
    with pytest.raises(UsageError, match="has 1 tower; it needs two or more"):
        as_async(with_towers(graph, 1)[0])


def test_a_thread_that_also_fetches_a_shared_counter_is_still_its_towers():
    """sess.run([train_op, global_step]): the counter belongs to no tower and does not make
    the thread everyone's."""
    data = _async_threads()
    data["ops"].insert(1, _op("gs", "ReadVariableOp", ["w"], device="/device:CPU:0"))
    data["order"].insert(1, "gs")
    for client in data["clients"]:
        client["fetches"].append("gs")
    graph, _ = convert(data, None)
    bigger, _ = with_towers(graph, 4)
    clients = {c.name: c.fetches for c in bigger.clients}
    assert clients["thread_3"] == ("apply [tower_3]", "gs") and len(clients) == 4
    fewer, _ = with_towers(graph, 1)
    assert [(c.name, c.fetches) for c in fewer.clients] == [("thread_0", ("apply", "gs"))]


def test_threads_are_named_by_where_their_fetches_were_made_not_by_who_looped_first():
    from simsync.tf_backend.program.child import thread_names

    order = ["w", "GradientDescent", "GradientDescent_1", "GradientDescent_2", "step"]
    looped = {  # the order the threads reached their loop: a race
        "Thread-3 (train_function)": ("GradientDescent_2", "step"),
        "Thread-1 (train_function)": ("GradientDescent", "step"),
        "Thread-2 (train_function)": ("GradientDescent_1", "step"),
    }
    names = thread_names(looped, order)
    assert names == {
        "Thread-1 (train_function)": "thread_0",
        "Thread-2 (train_function)": "thread_1",
        "Thread-3 (train_function)": "thread_2",
    }
    assert list(names) == sorted(looped)  # the clients go in that order too
    assert thread_names(dict(reversed(looped.items())), order) == names


def test_a_mode_no_program_can_change_to_is_one_line_before_the_program_runs(tmp_path):
    program = tmp_path / "train.py"
    program.write_text("raise SystemExit('this program must not run')\n")
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program), "--mode", "sync"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    one_clear_line(
        ran, "--mode sync: a program runs as it was written", "changed to are async, sync_replicas"
    )


@pytest.mark.parametrize(
    "options, said",
    [
        (["--replicas", "2"], "--replicas 2: it goes with --mode sync_replicas"),
        (["--mode", "async", "--replicas", "2"], "--mode async takes no --replicas"),
    ],
)
def test_replicas_without_a_mode_that_aggregates_is_one_line_before_the_program_runs(
    tmp_path, options, said
):
    program = tmp_path / "train.py"
    program.write_text("raise SystemExit('this program must not run')\n")
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program), *options],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    one_clear_line(ran, said)


def test_the_tower_loop_wrapped_in_sync_replicas():
    """--mode sync_replicas: each tower's thread pushes its own gradient to the variable's
    accumulator and takes a token; the chief takes R, runs the program's apply once per step,
    moves the global step and puts a token for every thread. Each step takes exactly R
    gradients (a quick thread may fill two slots of one step, as in TensorFlow); with R below
    the towers the slower tower's come too late and are dropped; R above them works too."""
    from simsync.errors import UsageError
    from simsync.scenario import ClusterConfig, Scenario
    from simsync.simulation import simulate, summary
    from simsync.tf_backend.program.modes import as_sync_replicas

    graph, _ = convert(_two_towers(), None)
    graph.replace_op(dataclasses.replace(graph.op("tower_0/grad"), cost=Cost(0.002)))
    # tower 1 is the slower: twice the work
    graph.replace_op(dataclasses.replace(graph.op("tower_1/grad"), cost=Cost(0.004)))
    graph.replace_op(dataclasses.replace(graph.op("concat"), cost=Cost(0.001)))
    wrapped, line = as_sync_replicas(graph)
    assert line == (
        "SyncReplicasOptimizer: 2 threads, one per tower, push gradients; the chief applies "
        "2 per step, once, 1 op of the averaging left out"
    )
    clients = {c.name: (c.fetches, c.until, c.daemon) for c in wrapped.clients}
    assert clients == {
        "queue_runner": (("sync_replicas/enqueue_tokens",), None, True),
        # the program's own step counter ('step' writes no trainable variable): one is added
        "thread_0": (("sync_replicas/dequeue_token [tower_0]",), "global_step", False),
        "thread_1": (("sync_replicas/dequeue_token [tower_1]",), "global_step", False),
    }
    push = "sync_replicas/push_gradients/w [tower_1]"
    assert [t.src for t in wrapped.inputs(push)] == ["ExpandDims_1"]
    assert wrapped.op(push).resource == "w/grad_accum" and wrapped.op(push).device == "/cpu:0"
    take = wrapped.op("sync_replicas/take_gradients/w")
    assert take.amount == 2 and take.cost.mean == 0.001  # the concat's cost, for 2 of 2
    assert [t.src for t in wrapped.inputs("apply")] == ["sync_replicas/take_gradients/w"]
    assert "concat" not in wrapped.nx and wrapped.resources["sync_token_q"].initial == 2
    scenario = Scenario("replicas", cluster=ClusterConfig(2)).with_run(steps=10)
    every = summary(simulate(scenario, numerics=False, graph=wrapped))
    assert every["workers"] == 2 and every["updates_applied"] == 10
    assert every["sync_points"] == ["sync_replicas/take_gradients/w"]
    pushed = every["gradients"]
    assert pushed["accepted"] == 2 * 10 and pushed["pushed"] == 20 + pushed["dropped"]
    assert every["step_time"]["p50"] >= 0.004  # it waits for the slower tower
    one, line = as_sync_replicas(graph, 1)
    assert "the chief applies 1 per step, once" in line
    first = summary(simulate(scenario, numerics=False, graph=one))
    assert first["updates_applied"] == 10 and first["sync_points"] == []
    by = first["gradients"]["by_worker"]
    assert first["gradients"]["accepted"] == 10
    assert by["thread_1"]["dropped"] > by["thread_0"]["dropped"]  # the slower tower's
    assert first["step_time"]["p50"] < every["step_time"]["p50"]  # no wait for it
    three = summary(simulate(scenario, numerics=False, graph=as_sync_replicas(graph, 3)[0]))
    assert three["updates_applied"] == 10 and three["gradients"]["accepted"] == 3 * 10
    with pytest.raises(UsageError, match="--replicas 0: a step applies at least 1 gradient"):
        as_sync_replicas(graph, 0)
    with pytest.raises(UsageError, match="already runs 2 threads"):
        as_sync_replicas(wrapped)


def test_sync_replicas_runs_what_a_tower_gave_the_update_beside_its_gradients():
    """A tower's batch-norm update grouped into the train op (cifar10_multi_gpu_train's
    tf.group(apply_gradient_op, batchnorm_updates_op)): each worker's train op runs its own
    before its token, and it is not counted as averaging. Towers that apply nothing averaged
    (each its own apply) are refused in one line."""
    from simsync.errors import UsageError
    from simsync.tf_backend.program.modes import as_sync_replicas

    data = _two_towers()
    for i in (0, 1):
        data["ops"].insert(1, _op(f"tower_{i}/bn_update", "AssignSubVariableOp", ["mm"],
                                  device=f"/device:GPU:{i}"))  # fmt: skip
        data["order"].insert(1, f"tower_{i}/bn_update")
    data["ops"].insert(0, _op("mm", "VarHandleOp", device="/device:CPU:0"))
    data["order"].insert(0, "mm")
    data["ops"].append(_op("train", "NoOp", control=["step", "tower_0/bn_update",
                                                     "tower_1/bn_update"]))  # fmt: skip
    data["order"].append("train")
    data["clients"][0]["fetches"] = ["train"]
    graph, _ = convert(data, None)
    wrapped, line = as_sync_replicas(graph)
    assert line.endswith(", 1 op of the averaging left out")
    dequeue = "sync_replicas/dequeue_token [tower_1]"
    assert "tower_1/bn_update" in {t.src for t in wrapped.inputs(dequeue)}
    # each tower applying its own gradients, one loop counting the steps where they meet:
    # nothing there takes an average
    alone = _async_threads()
    alone["ops"] += [_op("count", "VarHandleOp", device="/device:CPU:0"),
                     _op("count_up", "AssignAddVariableOp", ["count"], control=["apply", "apply_1"],
                         device="/device:CPU:0")]  # fmt: skip
    alone["order"] += ["count", "count_up"]
    alone["clients"] = [{"thread": "MainThread", "name": "main", "fetches": ["count_up"]}]
    with pytest.raises(UsageError, match="no op where the towers meet takes what their"):
        as_sync_replicas(convert(alone, None)[0])


def test_sync_replicas_counts_steps_with_the_programs_global_step():
    """A program whose update moves a global step: SyncReplicas' tokens carry it, and the
    threads stop when it reaches the steps; no counter of its own is added."""
    from simsync.ir import Variable
    from simsync.tf_backend.program.modes import as_sync_replicas

    graph, _ = convert(_two_towers(), None)
    graph.variables["w"] = dataclasses.replace(graph.variables["w"], trainable=True)
    graph.add_variable(Variable("global_step", "/cpu:0", nbytes=8, trainable=False))
    graph.replace_op(dataclasses.replace(graph.op("step"), writes=("global_step",)))
    wrapped, _ = as_sync_replicas(graph)
    assert {c.until for c in wrapped.clients if not c.daemon} == {"global_step"}
    assert "sync_replicas/apply_gradients" not in wrapped.nx
    assert [t.src for t in wrapped.inputs("sync_replicas/enqueue_tokens")] == ["step"]


def test_a_graphs_key_does_not_depend_on_the_order_of_its_control_inputs():
    # tf.group orders its control inputs by Python's string hash, which changes from one
    # process to the next: the same program must find its cached costs again
    from simsync.tf_backend.program.cost_cache import graph_key

    def data(control):
        op = {"name": "train", "type": "NoOp", "device": "", "inputs": [], "control": control}
        return {"ops": [op], "clients": [{"fetches": ["train"]}]}

    machine = {"cores": 2}
    same = graph_key("files", data(["a", "b", "c"]), machine)
    assert same == graph_key("files", data(["c", "a", "b"]), machine)
    assert graph_key("files", data(["a", "b"]), machine) != same
    # the program's files are part of the key: another program never reads these costs
    assert graph_key("other files", data(["a", "b", "c"]), machine) != same


def _access(variable, client, step, version, write, op="op"):
    from simsync.trace import VariableAccess

    return VariableAccess(variable, op, client, step, 0.0, version, write)


def test_a_replayed_run_is_computed_before_its_first_update_with_what_it_read():
    from simsync.tf_backend.program.values import _compute_points

    a, b = "thread_0", "thread_1"
    accesses = [
        _access("w", a, 0, 0, False),
        _access("w", b, 0, 0, False),
        _access("w", a, 0, 1, True),  # a applies: version 1
        _access("w", b, 0, 2, True),  # b applies, stale: it read version 0
    ]
    # each run computes at its last read (before its write), with the version it read
    assert _compute_points(accesses) == {0: [(a, 0, {"w": 0})], 1: [(b, 0, {"w": 0})]}


@pytest.mark.parametrize(
    "accesses, words",
    [
        (  # reads w twice, at two versions: not one computation
            [
                _access("w", "a", 0, 0, False),
                _access("w", "b", 0, 1, True),
                _access("w", "a", 0, 1, False),
                _access("w", "a", 0, 2, True),
            ],
            "two versions",
        ),
        (  # reads y after its own first update, a version made since
            [
                _access("x", "a", 0, 0, False),
                _access("x", "a", 0, 1, True),
                _access("y", "b", 0, 1, True),
                _access("y", "a", 0, 1, False),
            ],
            "after its own first update",
        ),
    ],
)
def test_a_run_that_is_not_one_computation_has_no_values(accesses, words):
    from simsync.tf_backend.program.values import NoValues, _compute_points

    with pytest.raises(NoValues, match=words):
        _compute_points(accesses)


def _timed_towers():
    """Two towers of 1 ms each on a machine of 2 cores, meeting in a concat of 0.1 ms; the
    loop's sess.run costs 0.05 ms of its own."""
    graph, _ = convert(_two_towers(), None)
    graph.host_cores["localhost"] = 2
    for op in graph.ops():
        cost = 0.0005 if op.tower is not None else 0.0001
        graph.replace_op(dataclasses.replace(op, cost=Cost(cost)))
    client = dataclasses.replace(graph.clients[0], overhead=5e-5)
    graph.clients[0] = client
    return graph


@pytest.mark.parametrize("wall", [0.0015, 0.0040])
def test_a_step_longer_than_its_traced_ops_is_tensorflows_own_work_per_run(wall):
    """The untraced step is longer than the ops as traced: the rest is each run's own work
    (its ops keep their costs); shorter: every op is scaled down. Either way the fitted
    graph's simulated step is the untraced one."""
    from simsync.simulation.fit import apply_fit, fit_costs, simulate_graph

    graph = _timed_towers()
    alone = simulate_graph(graph, 6).trace.steps[-1].duration
    fitted, found = fit_costs(graph, {"main": wall})
    assert found["wall"] == wall and abs(found["simulated"] - wall) < 1e-6
    if wall > alone:
        assert found["scale"] == 1.0 and found["per_run"] > 0
        assert fitted.op("tower_0/fwd").cost == graph.op("tower_0/fwd").cost
        # TensorFlow's own work in a run: a core, not the GIL (the client's overhead is)
        assert fitted.clients[0].run_work == found["per_run"]
        assert fitted.clients[0].overhead == 5e-5
    else:
        assert found["scale"] < 1.0 and found["per_run"] == 0.0
        assert fitted.clients[0].overhead == 5e-5 and fitted.clients[0].run_work == 0.0
    again = apply_fit(graph, found)  # what a cached fit gives
    assert again.clients[0] == fitted.clients[0]
    assert again.op("concat").cost == fitted.op("concat").cost


def test_every_op_is_for_a_program_only():
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "graph", str(ROOT / "examples" / "four_towers.toml"),
         "--every-op"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    one_clear_line(ran, "--every-op unfolds a TensorFlow program's graph", "is a scenario")


def test_a_cycle_between_scopes_becomes_one_box():
    """Two scopes that feed each other (a -> b -> a) cannot be two boxes of a dataflow
    graph: they are drawn as one."""
    from simsync.ir import Client, Device, Graph, Op
    from simsync.viz import folded_by_scope

    graph = Graph()
    graph.add_device(Device("/cpu:0"))
    for name in ("a/x", "b/y", "a/z"):
        graph.add_op(Op(name, "generic", "/cpu:0", Cost(1.0)))
    graph.connect("a/x", "b/y")
    graph.connect("b/y", "a/z")
    graph.add_client(Client("main", ("a/z",)))
    folded = folded_by_scope(graph)
    assert [op.name for op in folded.ops()] == ["a + b (3 ops)"]
    assert folded.op("a + b (3 ops)").cost.mean == 3.0


def test_a_what_if_says_how_it_extended_its_speeds_and_when_it_changes_nothing():
    from simsync.tf_backend.program.whatif import with_link, with_speeds

    graph, _ = convert(_two_towers(), None)
    _, line = with_speeds(graph, [1, 0.5, 0.25])
    assert line == (
        "tower devices at speeds 1, 0.5, 0.25 (3 speeds for 2 towers: tower_0 1, tower_1 0.5)"
    )
    assert with_speeds(graph, [1, 0.5])[1] == "tower devices at speeds 1, 0.5"
    assert "change nothing" not in with_link(graph, 1.0, None)[1]
    one = _two_towers()
    for op in one["ops"]:
        op["device"] = "/device:CPU:0"  # every op on one device: no tensor travels
    alone, _ = convert(one, None)
    assert with_link(alone, 1.0, None)[1].endswith("so they change nothing")
    assert with_speeds(alone, [0.5])[1].endswith("so they change nothing")


def test_speeds_reach_replicas_on_logical_cpus_of_their_own():
    """A tf.distribute strategy's replicas on logical CPUs (no GPU here): each replica's
    device is its own, so a what-if's speeds slow it (TF2 programs were told the speeds
    "change nothing"); /cpu:0, where the TF1 towers here read the variables, is no tower's."""
    from simsync.simulation import summary
    from simsync.simulation.fit import simulate_graph
    from simsync.tf_backend.program.whatif import tower_devices, with_speeds

    data = _two_towers()
    for op in data["ops"]:
        if op["device"].startswith("/device:GPU:"):  # a TF2 step names its logical CPUs
            op["device"] = "/cpu:" + op["device"][-1]
    graph, _ = convert(data, None)
    # replica 0's device runs the ops where the replicas meet, as under MirroredStrategy
    assert tower_devices(graph) == {0: "/cpu:0", 1: "/cpu:1"}
    for op in graph.ops():
        if op.tower is not None:
            graph.replace_op(dataclasses.replace(op, cost=Cost(1e-3)))
    slow, line = with_speeds(graph, [1, 0.25])
    assert line == "tower devices at speeds 1, 0.25"
    assert slow.devices["/cpu:1"].speed == 0.25 and slow.devices["/cpu:0"].speed == 1
    waited = summary(simulate_graph(slow, 10, name="two", source="two.py"))["waited_for"]
    assert waited["concat"] == {"tower_0": 0, "tower_1": 10}
    tf1 = _two_towers()
    for op in tf1["ops"]:
        if op["name"].endswith("/read"):  # each tower reads the variables on /cpu:0
            op["device"] = "/device:CPU:0"
    assert tower_devices(convert(tf1, None)[0]) == {0: "/gpu:0", 1: "/gpu:1"}


def test_a_one_device_program_under_one_scope_folds_into_the_scopes_below_it():
    from simsync.viz.fold import folded_by_scope

    data = _two_towers()  # every op renamed under Train/, and on the one CPU: no towers
    rename = {op["name"]: f"Train/{op['name']}" for op in data["ops"]}
    for op in data["ops"]:
        op["name"], op["device"] = rename[op["name"]], "/device:CPU:0"
        for tensor in op["inputs"]:
            tensor["op"] = rename[tensor["op"]]
        op["control"] = [rename[c] for c in op["control"]]
    data["order"] = [op["name"] for op in data["ops"]]
    data["clients"][0]["fetches"] = ["Train/step"]
    data["trainable"] = ["Train/w"]
    graph, _ = convert(data, None)
    assert not graph.towers
    boxes = sorted(op.name for op in folded_by_scope(graph).ops())
    assert len(boxes) > 1 and all(box.startswith("Train/") for box in boxes), boxes


def test_where_the_towers_outnumber_the_cores_the_gpu_answer_is_said_beside_this_machines():
    """8 towers on this machine's 2 cores take turns; on GPUs, each on a device of its own,
    the half-speed towers are the ones the others wait for (issue: lesson 1's program with
    --towers 8 --speeds 1,0.8,0.5,1 named no straggler)."""
    from simsync.ir import LOCALHOST
    from simsync.simulation import summary
    from simsync.simulation.fit import simulate_graph
    from simsync.simulation.user_program import on_gpus
    from simsync.tf_backend.program.whatif import with_speeds
    from simsync.viz.import_report import on_gpus_lines

    graph, _ = convert(_two_towers(), None)
    for op in graph.ops():
        if op.tower is not None:  # each tower's work: 1 ms at speed 1
            graph.replace_op(dataclasses.replace(op, cost=Cost(5e-4)))
    graph, _ = with_speeds(with_towers(graph, 8)[0], [1, 0.8, 0.5, 1])
    assert on_gpus(graph, 20, 0, "two.py") is None  # devices of their own already
    graph.host_cores[LOCALHOST] = 2
    found = on_gpus(graph, 20, 0, "two.py")
    assert found is not None
    assert found["line"] == (
        "here the 8 towers share 2 cores; on GPUs each tower has a device of its own"
    )
    half = {"tower_2", "tower_6"}
    assert sum(found["last"].get(t, 0) for t in half) >= found["meetings"]
    assert not {t for t, n in found["last"].items() if n} - half  # only they come last there
    here = summary(simulate_graph(graph, 20, name="two", source="two.py", seed=0))
    assert found["step_time"] < here["step_time"]["mean"]  # 2 cores for 8 towers' work
    lines = on_gpus_lines({"step_time": here["step_time"], "on_gpus": found})
    # the two half-speed towers, as slow as each other: whichever the order has last
    assert found["slowest"] and all(t == ["tower_2", "tower_6"] for t in found["slowest"].values())
    assert (
        lines[-1] == "  last at a sync point there: tower_2 and tower_6, the slowest (each as slow)"
    )
    assert max(len(line) for line in lines) <= 78  # 80 columns, indented by the report


def test_on_gpus_each_towers_copy_of_the_same_work_costs_the_copies_median():
    """Each tower's ops were timed while the other towers took turns with them on the
    machine's cores, so some copies read slower by chance (CI, loaded: lesson 2's replica 3
    came out slower than the half-speed replica 2). On GPUs the towers' same work costs the
    same, and the slow device is the one waited for, whatever tower the noise hit."""
    from simsync.ir import LOCALHOST, same_work
    from simsync.simulation.user_program import on_gpus
    from simsync.tf_backend.program.whatif import on_devices_of_their_own, with_speeds

    graph, _ = convert(_two_towers(), None)
    graph, _ = with_towers(graph, 4)
    for op in graph.ops():
        if op.tower is not None:  # 1 ms a tower, tower 3's copies timed 2.5 times as long
            seconds = 2.5e-4 * (2.5 if op.tower == 3 else 1.0)
            graph.replace_op(dataclasses.replace(op, cost=Cost(seconds)))
    graph, _ = with_speeds(graph, [1, 0.8, 0.5, 1])
    graph.host_cores[LOCALHOST] = 2
    groups = same_work(graph)
    # 4 ops of each tower's work: its read, forward and gradient, and its ExpandDims
    assert len(groups) == 4 and all(len(copies) == 4 for copies in groups), groups
    assert ("tower_0/fwd", "tower_1/fwd", "tower_2/fwd", "tower_3/fwd") in groups
    own = on_devices_of_their_own(graph)
    assert own is not None
    alone, _ = own
    pooled = {alone.op(name).cost.mean for copies in groups for name in copies if "/" in name}
    assert pooled == {2.5e-4}
    assert graph.op("tower_3/fwd").cost.mean == 6.25e-4  # the graph itself unchanged
    found = on_gpus(graph, 20, 0, "two.py")
    assert found is not None
    assert {t for t, n in found["last"].items() if n} == {"tower_2"}, found["last"]


def test_moving_averages_kept_in_no_update_ops_collection_are_found_and_reported():
    """The held-out Inception trainer keeps its batch norm's updates in slim's own collection:
    an update of a variable that is not trained, one tower's work, is found all the same."""
    from simsync.viz.import_report import _update_ops

    data = _two_towers()
    data["ops"].insert(0, _op("moving", "VarHandleOp", device="/device:CPU:0"))
    for i in (0, 1):
        # each tower's update reads the moving average on its way (as assign_moving_average
        # does): its own read, part of the race of the two updates, not a read beside them
        own = _op(f"tower_{i}/bn/read", "ReadVariableOp", ["moving"], device=f"/device:GPU:{i}")
        update = _op(f"tower_{i}/bn/update", "AssignSubVariableOp",
                     ["moving", f"tower_{i}/fwd", own["name"]],
                     device=f"/device:GPU:{i}")  # fmt: skip
        data["ops"] += [own, update]
        data["clients"][0]["fetches"].append(update["name"])
    data["order"] = [op["name"] for op in data["ops"]]
    _, report = convert(data, None)
    assert report["update_ops"] == {"collected": 0, "run": 2, "towers": [0, 1],
                                    "racing": ["moving"], "read_unordered": {}}  # fmt: skip
    (line,) = _update_ops(report, 2)
    assert line.startswith("moving averages (in no UPDATE_OPS collection): the training loop")
    assert "they race on 1 moving average" in line
    # an exponential moving average kept of it (the Inception trainer's), run by the same
    # step with no order between its read and the updates: which value it reads is a race
    data["ops"].append(_op("ema/read", "ReadVariableOp", ["moving"], device="/device:CPU:0"))
    data["clients"][0]["fetches"].append("ema/read")
    data["order"].append("ema/read")
    _, report = convert(data, None)
    assert report["update_ops"]["read_unordered"] == {"moving": "ema/read"}
    assert _update_ops(report, 2)[1].startswith(
        "1 moving average is read in the same step in no order with its update (by ema/read)"
    )
    # read after both updates (a control dependency): no race
    data["ops"][-1]["control"] = ["tower_0/bn/update", "tower_1/bn/update"]
    _, report = convert(data, None)
    assert report["update_ops"]["read_unordered"] == {}
    assert len(_update_ops(report, 2)) == 1


def test_a_program_whose_file_name_holds_a_newline_is_one_line_before_it_runs(tmp_path):
    """The twelfth attack's d17: `simulate $'nl\\nname.py'` answered with the wire's own words
    ("made_in[0]: a text without control characters"); now the name is refused first."""
    program = tmp_path / "nl\nname.py"
    program.write_text("raise SystemExit('this program must not run')\n")
    ran = subprocess.run(
        [sys.executable, "-m", "simsync", "simulate", str(program)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    one_clear_line(ran, "its file name holds a control character", "rename it")


def test_a_run_said_to_trace_more_steps_than_a_run_holds_keeps_to_its_own_numbers():
    """A (forged) report of 1,500 traced steps in a run gave its last 500 the next run's
    numbers: the cross-check judged them as that run's."""
    from simsync.crosscheck.user_program import RUN_STEPS, real_trace

    graph, _ = convert(_two_towers(), None)
    record = [("concat", "/cpu:0", 0.0, 1e-4, None)]
    runs = [{"clients": {"MainThread": {"steps": [record] * n}}} for n in (1500, 2)]
    trace = real_trace(graph, runs, {"MainThread": "main"})
    numbers = sorted(step.step for step in trace.steps)
    assert numbers[:RUN_STEPS] == list(range(RUN_STEPS))  # run 0, cut at its last number
    assert numbers[RUN_STEPS:] == [RUN_STEPS, RUN_STEPS + 1]  # run 1's own two
